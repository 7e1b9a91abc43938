"""The host side of one slot: start its zygote in fresh namespaces, send requests, notice death."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dojo.sandbox.cgroups import SlotCgroups
from dojo.sandbox.errors import IsolationUnavailable, SandboxError
from dojo.sandbox.guest.wire import FRAME_PREFIX, decode_frame_body, encode_frame
from dojo.sandbox.network import NetworkRelay
from dojo.sandbox.seccomp import SlotFilters
from dojo.sandbox.spawn import SpawnedProcess, spawn
from dojo.sandbox.uncancellable import to_the_end

log = logging.getLogger(__name__)
NAMESPACE_FLAGS = ("--pid", "--fork", "--kill-child", "--mount", "--net", "--ipc", "--uts")
ROOTLESS_FLAGS = ("--user", "--map-root-user")  # the caller is root inside the slot, nobody outside
STARTUP_TIMEOUT = 30.0

# What runs in the sandbox (``dojo.sandbox.guest``), in import order: each module imports only those
# before it, and the zygote, last, is the one whose ``main()`` the bootstrap calls.
GUEST = Path(__file__).resolve().parent / "guest"
GUEST_MODULES = ("wire", "syscalls", "capture", "cgroup", "jail", "ending", "child", "forker", "judge", "processes",
                 "oneshot", "preload", "sessions", "trusted", "zygote")  # fmt: skip

# The zygote's code reaches it compiled (marshal) on stdin ahead of the first request: compiling
# 1,200 lines in every slot left ~2 MB of parser garbage in each zygote's heap (idle PSS per slot
# 10.7 -> 7.7 MiB measured), and a strict run skips the compile altogether. The interpreter that
# runs the zygote compiles it, once per host process, so the bytecode always matches it: one list of
# (module name, file name, code object), which the bootstrap makes modules of, in order, then calls
# the last one's ``main()`` (``guest.zygote.main``), which reads its configuration next, a frame on
# stdin too: as an argument it was in every run's /proc/self/cmdline and ``sys.orig_argv`` (the
# host's paths and pid, the slot's cgroups, uid and syscall filters; found 2026-12-07).
ZYGOTE_BOOTSTRAP = """\
_dojo_startup = tuple(__import__("sys").modules)  # (what python3 has imported by a script's start)
import marshal, os, sys, types
def _read(n):
    data = b""
    while len(data) < n:
        chunk = os.read(0, n - len(data))
        if not chunk:
            raise SystemExit("dojo zygote: stdin closed before the code arrived")
        data += chunk
    return data
for _name, _file, _code in marshal.loads(_read(int(sys.argv[1]))):
    _package = _name.rpartition(".")[0]
    while _package and _package not in sys.modules:  # the packages above it, as empty placeholders
        sys.modules[_package] = types.ModuleType(_package)
        _package = _package.rpartition(".")[0]
    _module = sys.modules[_name] = types.ModuleType(_name)
    _module.__file__ = _file
    exec(_code, _module.__dict__)
del _read, _code
_module.main()
"""
COMPILE_ZYGOTE = (
    "import marshal, sys\n"
    "modules = zip(sys.argv[1::2], sys.argv[2::2])\n"
    "code = [(name, f, compile(open(f, 'rb').read(), f, 'exec', dont_inherit=True)) for name, f in modules]\n"
    "sys.stdout.buffer.write(marshal.dumps(code))\n"
)
_compiled_zygotes: dict[str, bytes] = {}


async def compiled_zygote(python: str) -> bytes:
    """The guest modules' code objects, marshalled by ``python`` itself (cached per interpreter): a
    list of (module name, file name, code object) in ``GUEST_MODULES``' order."""
    code = _compiled_zygotes.get(python)
    if code is None:
        modules = [arg for name in GUEST_MODULES for arg in (f"dojo.sandbox.guest.{name}", str(GUEST / f"{name}.py"))]
        argv = (python, "-S", "-E", "-s", "-B", "-c", COMPILE_ZYGOTE, *modules)
        try:
            proc = await spawn(argv, {"PATH": "/usr/bin:/bin"}, stdout=True, stderr=True)
        except (OSError, TimeoutError) as e:
            raise IsolationUnavailable(f"cannot start the sandbox interpreter {python!r}: {e}") from e
        try:
            async with asyncio.timeout(STARTUP_TIMEOUT):
                out, err = await proc.communicate()
        except BaseException as e:  # cancelled too: the compiler does not outlive the start
            proc.kill()
            if isinstance(e, TimeoutError):
                why = f"the sandbox interpreter {python!r} did not compile the zygote in time"
                raise IsolationUnavailable(why) from e
            raise
        finally:
            proc.close()
        if proc.returncode != 0 or not out:
            detail = err.decode(errors="replace").strip() or f"exit status {proc.returncode}"
            raise IsolationUnavailable(f"the sandbox interpreter {python!r} could not compile the zygote: {detail}")
        code = _compiled_zygotes.setdefault(python, out)
    return code


@dataclass(frozen=True)
class SlotConfig:
    """How slots are built. ``python`` is the interpreter zygotes (and Python programs) run on."""

    python: str
    extra_ro_paths: tuple[str, ...] = ()
    masked: tuple[str, ...] = ()  # host directories that runs see empty, should a bound path hold them
    disk_bytes: int = 64 << 20
    cgroup_version: int = 1
    rootless: bool = False
    syscall_filters: SlotFilters | None = None  # dojo.sandbox.seccomp's programs
    mounts: tuple[tuple[str, str], ...] = ()  # (host path, path inside), read-only: an environment
    python_paths: tuple[str, ...] = ()  # put first on the zygote's sys.path
    preload_modules: tuple[str, ...] = ()  # imported by the zygote, so every run forks with them
    warmup: str = ""  # then run once by the zygote (an environment's lazy set-up, done there)
    etc_files: tuple[tuple[str, str], ...] = ()  # (name, text): files shown over /etc/<name>
    network_relay: NetworkRelay | None = None  # an allow policy's listeners, attached to each slot
    spare: bool = False  # fork the next run's process while the slot is idle (AsyncSandbox's spare)
    forker: str | None = None  # the built forker library (dojo.sandbox.forker_build); None: fork from the zygote
    unshare: str = field(default_factory=lambda: shutil.which("unshare") or "/usr/bin/unshare")


class SlotDied(SandboxError):
    """The slot's zygote exited or broke the protocol."""


class Slot:
    """One warm zygote. Serves one request at a time; the pool guarantees that."""

    def __init__(self, name: str, uid: int, config: SlotConfig, cgroups: SlotCgroups | None) -> None:
        self.name = name
        self.uid = uid
        self.config = config
        self.cgroups = cgroups
        self.proc: SpawnedProcess | None = None
        self.alive = False

    async def start(self) -> None:
        """Start the zygote and wait for it to say it is isolated. On any failure, cancellation
        included, everything started so far is killed before the exception goes on."""
        try:
            await self._start()
        except BaseException:
            await to_the_end(self.kill())
            raise

    async def _start(self) -> None:
        cg_paths = self.cgroups.create_slot(self.name) if self.cgroups else {}
        zconfig: dict[str, Any] = {
            "uid": self.uid,
            "cgroups": cg_paths,
            "cgroup_version": self.config.cgroup_version,
            "extra_ro_paths": list(self.config.extra_ro_paths),
            "masked": list(self.config.masked),
            "disk_bytes": self.config.disk_bytes,
            "keep_host_netns": None if self.config.rootless else f"/proc/{os.getpid()}/ns/net",
            "rootless": self.config.rootless,
            "seccomp": self._filters(),
            "mounts": [list(m) for m in self.config.mounts],
            "python_paths": list(self.config.python_paths),
            "preload_modules": list(self.config.preload_modules),
            "warmup": self.config.warmup,
            "etc_files": dict(self.config.etc_files),
            "spare": self.config.spare,
            "forker": self.config.forker,
        }
        flags = (*ROOTLESS_FLAGS, *NAMESPACE_FLAGS) if self.config.rootless else NAMESPACE_FLAGS
        code = await compiled_zygote(self.config.python)
        argv = [
            self.config.unshare, *flags, "--",
            self.config.python, "-S", "-E", "-s", "-B", "-c", ZYGOTE_BOOTSTRAP, str(len(code)),
        ]  # fmt: skip
        env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}  # nothing of the host's environment
        try:
            self.proc = await spawn(
                argv, env, stdin=True, stdout=True, stderr=True, limit=1 << 20, start_new_session=True
            )
        except (OSError, TimeoutError) as e:
            raise IsolationUnavailable(f"slot {self.name} could not be started: {e}") from e
        try:
            assert self.proc.stdin is not None
            self.proc.write(code)
            self.proc.write(encode_frame(zconfig, []))  # (on stdin: a run reads its process's command line)
            await self.proc.stdin.drain()
            header, _ = await asyncio.wait_for(self._read_frame(), STARTUP_TIMEOUT)
        except (TimeoutError, asyncio.IncompleteReadError, ConnectionError) as e:
            stderr = await self._collect_stderr()
            raise IsolationUnavailable(f"slot {self.name} did not start: {stderr or type(e).__name__}".strip()) from e
        if not header.get("ready"):
            raise IsolationUnavailable(f"slot {self.name} could not isolate itself: {header.get('error')}")
        if header.get("forker_error"):
            log.warning("slot %s: its zygote could not load the forker (%s); it forks runs itself", self.name,
                        header["forker_error"])  # fmt: skip
        if self.config.network_relay is not None:
            try:
                await self.config.network_relay.attach(self.proc.pid)
            except OSError as e:
                raise IsolationUnavailable(f"slot {self.name} could not open its allowed destinations: {e}") from e
        self.alive = True

    def _filters(self) -> dict[str, str | None] | None:
        filters = self.config.syscall_filters
        if filters is None:
            return None
        return {"zygote": filters.zygote.hex(), "run": filters.run.hex() if filters.run else None}

    async def _collect_stderr(self) -> str:
        if self.proc is None or self.proc.stderr is None:
            return ""
        with contextlib.suppress(Exception):
            data = await asyncio.wait_for(self.proc.stderr.read(8192), 1.0)
            return data.decode(errors="replace").strip()
        return ""

    async def _read_frame(self) -> tuple[dict[str, Any], list[bytes]]:
        assert self.proc is not None and self.proc.stdout is not None
        prefix = await self.proc.stdout.readexactly(FRAME_PREFIX.size)
        hlen, blen = FRAME_PREFIX.unpack(prefix)
        header_raw = await self.proc.stdout.readexactly(hlen)
        body = await self.proc.stdout.readexactly(blen) if blen else b""
        return decode_frame_body(header_raw, body)

    async def request(
        self, header: dict[str, Any], blobs: list[bytes], timeout: float
    ) -> tuple[dict[str, Any], list[bytes]]:
        """Send one request and wait for its answer; SlotDied if the zygote is gone or too late."""
        if not self.alive or self.proc is None or self.proc.stdin is None:
            raise SlotDied(f"slot {self.name} is not running")
        try:
            self.proc.write(encode_frame(header, blobs))
            await self.proc.stdin.drain()
            async with asyncio.timeout(timeout):  # no task per request, unlike wait_for
                resp, out = await self._read_frame()
        except TimeoutError as e:
            await self.kill()
            raise SlotDied(f"slot {self.name} did not answer within {timeout:.1f}s; it was killed") from e
        except (asyncio.IncompleteReadError, ConnectionError, BrokenPipeError, ValueError) as e:
            await self.kill()
            raise SlotDied(f"slot {self.name} died during the run ({type(e).__name__})") from e
        except asyncio.CancelledError:
            await self.kill()  # the answer would arrive out of step: this slot is unusable now
            raise
        return resp, out

    async def kill(self) -> None:
        """Kill the zygote and everything in its namespaces and groups; remove its groups."""
        self.alive = False
        if self.proc is not None:
            if self.config.network_relay is not None:
                self.config.network_relay.detach(self.proc.pid)
            if self.proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    self.proc.kill()
            if self.cgroups:
                await asyncio.to_thread(self.cgroups.kill_slot, self.name)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.proc.wait(), 10)
            self.proc.close()
        if self.cgroups:
            await asyncio.to_thread(self.cgroups.remove_slot, self.name)

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None
