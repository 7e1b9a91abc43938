"""What a run printed and which limit it hit: ``Capture``, the one output pump (stdout and stderr,
each capped), and ``classify_limit``, the one limit classifier, both shared by the two run paths
(a one-shot run, ``guest.oneshot``; a session's exec, ``guest.sessions``).

Runs inside the sandbox, in the zygote: standard library only.
"""

from __future__ import annotations

import os

from dojo.sandbox.guest.wire import RunLimits

OUT_OF_MEMORY_MARKS = (b"MemoryError", b"std::bad_alloc", b"Cannot allocate memory", b"out of memory",
                       b"JavaScript heap out of memory", b"Failed to reserve virtual memory")  # fmt: skip


class Capture:
    """A run's stdout and stderr, each kept up to ``cap`` bytes; what goes past is dropped and
    flagged. The one output pump of both run paths (a one-shot run, a session's exec)."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.out = bytearray()
        self.err = bytearray()
        self.truncated = {"stdout": False, "stderr": False}

    def drain(self, fd: int, name: str) -> bool:
        """Read what ``fd`` has now into the stream ``name``; False at end of file."""
        buf = self.out if name == "stdout" else self.err
        while True:
            try:
                chunk = os.read(fd, 1 << 16)
            except BlockingIOError:
                return True
            if not chunk:
                return False
            room = self.cap - len(buf)
            if len(chunk) > room:
                buf += chunk[: max(room, 0)]
                self.truncated[name] = True
            else:
                buf += chunk

    @property
    def over_cap(self) -> bool:
        return self.truncated["stdout"] or self.truncated["stderr"]


def classify_limit(
    limit: str | None, lim: RunLimits, *, memory_cgroup: bool, sig: int | None, cpu: float, oom: bool,
    failed: bool, err: bytearray, max_rss: int,
) -> str | None:  # fmt: skip
    """Which limit a run (one-shot, or a session's exec) hit: ``limit`` when the zygote enforced
    one itself (wall, output), else what the facts say. One classifier for both run paths."""
    if limit is not None:
        return limit
    if sig == 24 or cpu > lim["cpu_s"]:  # SIGXCPU, or over its budget
        return "cpu"
    if oom:
        return "memory"
    # Address-space limit (no memory cgroup): a failed allocation shows as the program's own
    # error report, or as a failure after its resident memory came close to the limit.
    if failed and not memory_cgroup and (out_of_memory(err) or max_rss >= 0.75 * lim["memory_bytes"]):
        return "memory"
    if sig == 25:  # SIGXFSZ
        return "file_size"
    return None


def out_of_memory(stderr: bytearray) -> bool:
    """Where memory is an address-space rlimit, a failed allocation shows only in the program's own
    report: a Python MemoryError, a C++ bad_alloc, V8's fatal OOM, a C library's ENOMEM message."""
    tail = bytes(stderr[-4096:])
    return any(mark in tail for mark in OUT_OF_MEMORY_MARKS)
