"""The compile cache: what a compiled language's compile step left for its run step, by the exact
inputs that produced it, so identical source compiles once.

A build is keyed by the SHA-256 of the language, its toolchain, the compile command and every
input file (source included). The compile runs in the sandbox like any step, as its own request
whose only output is the artifact, fetched *before* any run step exists: no run can touch what is
cached. A failed compile is cached too (a compile error is a property of the source), unless a
limit stopped it (another request may give it more time).
"""

from __future__ import annotations

import collections
import hashlib
from dataclasses import dataclass

from dojo.sandbox.result import StepResult

MAX_BYTES = 512 << 20  # artifacts kept in memory, least recently used dropped first


@dataclass(frozen=True)
class Build:
    """A compile step's outcome: its result, and (when it succeeded) the artifact."""

    compile: StepResult
    artifact: bytes | None  # None: the compile failed

    @property
    def ok(self) -> bool:
        return self.artifact is not None

    @property
    def size(self) -> int:
        """Bytes it holds in the cache: the artifact and the compile's output."""
        return len(self.artifact or b"") + len(self.compile.stdout) + len(self.compile.stderr)


def build_key(language: str, toolchain: str, compile_argv: list[str], files: list[tuple[str, bytes]]) -> str:
    digest = hashlib.sha256()
    for part in (language, toolchain, "\0".join(compile_argv)):
        digest.update(part.encode() + b"\0")
    for path, content in sorted(files):
        digest.update(path.encode() + b"\0" + str(len(content)).encode() + b"\0" + content)
    return digest.hexdigest()


class BuildCache:
    """An LRU of builds bounded by their artifacts' bytes. ``hits`` counts builds served from it,
    ``misses`` the compiles that had to run (concurrent identical programs share one)."""

    def __init__(self, max_bytes: int = MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self._builds: collections.OrderedDict[str, Build] = collections.OrderedDict()
        self._bytes = 0
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> Build | None:
        """The build, counted as a hit, its compile step marked ``cached`` (it did not run for the
        program asking: an episode's tool clock counts none of its time); None (not counted:
        ``misses`` counts compiles) when absent."""
        build = self._builds.get(key)
        if build is None:
            return None
        self._builds.move_to_end(key)
        self.hits += 1
        return Build(build.compile.model_copy(update={"cached": True}), build.artifact)

    def put(self, key: str, build: Build) -> None:
        size = build.size
        if size > self.max_bytes:
            return
        old = self._builds.pop(key, None)
        if old is not None:
            self._bytes -= old.size
        self._builds[key] = build
        self._bytes += size
        while self._bytes > self.max_bytes:
            _, dropped = self._builds.popitem(last=False)
            self._bytes -= dropped.size

    def __len__(self) -> int:
        return len(self._builds)
