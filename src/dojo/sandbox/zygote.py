"""The slot zygote: the process that lives inside a slot's namespaces and forks one child per run.

This file runs *inside* the sandbox under a plain system interpreter (``python3 -S -E -s``), so it
imports nothing but the standard library. The host side (``dojo.sandbox.slot``) imports only its
framing helpers.

Life of a zygote (started by ``unshare --pid --fork --mount --net --ipc --uts``, so it is PID 1 of
fresh namespaces and runs as root in them):

1. join the slot's cgroups (memory, pids), keeping open file descriptors to the control files;
2. build a new root on a tmpfs: read-only, nosuid binds of ``/usr``, ``/etc`` and any extra paths,
   a minimal ``/dev``, a fresh ``/proc``, private tmpfs ``/tmp``, ``/dev/shm`` and work dir
   ``/box``; ``pivot_root`` into it and detach the host's root;
3. answer ``{"ready": true}`` and serve requests, one at a time, on fds 0 (in) and 1 (out).

For each step of a request it forks a child that applies rlimits, drops to the slot's
unprivileged uid with ``no_new_privs`` and either runs Python source in-process (the fast path: no
interpreter start-up) or ``execve``s a program. The zygote feeds stdin, reads stdout/stderr up to
the output cap, enforces the wall-clock limit, then kills every other process in the namespace,
reaps them, moves to a fresh IPC namespace if the run left a SysV or POSIX IPC object, and wipes
``/box``, ``/tmp`` and ``/dev/shm``. It reports raw facts
(exit status, signal, times, peak memory, OOM kills, which limit it enforced); the host turns them
into verdicts.

The parts, in this order:

- the framing (``encode_frame``, ``_read_frame``), shared with the host;
- the typed wire messages: ``RunStep`` (a request's step), ``RunLimits`` (its limits), ``RunReply``
  (a step's facts), ``SessionWorker`` (a session's interpreter);
- ``Syscalls``: libc (mounts, namespaces, prctl, the raw fork);
- ``Capture``: the one output pump (capped stdout and stderr) of both run paths;
- ``classify_limit``: the one limit classifier of both run paths;
- ``CgroupHandle``: per-run memory and pids limits, peak memory, OOM kills;
- ``Jail``: loopback, the new root, the watched IPC namespace, scratch wiping;
- ``Zygote``: request handling, the one-shot run path (``run_step``) and the child's set-up
  (``child``);
- ``Sessions``: the session worker, a session's persistent interpreter (``start``, ``run``, ``stop``).
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # (signal.signal without its enum wrapping)
import _thread
import array
import builtins
import errno
import fcntl
import json
import marshal
import os
import resource
import select
import signal
import socket
import stat
import struct
import sys
import time
import types
from typing import Any, NotRequired, TypedDict

# ---------------------------------------------------------------------------------------------
# Framing, shared with the host: ">II" (header length, blob bytes), JSON header, blobs.
# The header lists blob lengths under "blobs"; other fields refer to blobs by index.
# ---------------------------------------------------------------------------------------------

FRAME_PREFIX = struct.Struct(">II")
MAX_HEADER = 64 * 1024 * 1024


def encode_frame(header: dict[str, Any], blobs: list[bytes]) -> bytes:
    header = dict(header)
    header["blobs"] = [len(b) for b in blobs]
    raw = json.dumps(header, separators=(",", ":")).encode()
    return FRAME_PREFIX.pack(len(raw), sum(len(b) for b in blobs)) + raw + b"".join(blobs)


def decode_frame_body(header_raw: bytes, body: bytes) -> tuple[dict[str, Any], list[bytes]]:
    header = json.loads(header_raw)
    blobs: list[bytes] = []
    offset = 0
    for length in header.get("blobs", []):
        blobs.append(body[offset : offset + length])
        offset += length
    if offset != len(body):
        raise ValueError("frame body length does not match its blob table")
    return header, blobs


def _read_exact(fd: int, n: int) -> bytes:
    chunks = []
    while n:
        chunk = os.read(fd, min(n, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def _read_header(fd: int) -> tuple[dict[str, Any], bytes, int]:
    """A frame's header (parsed, and as read) and the length of the body after it."""
    hlen, blen = FRAME_PREFIX.unpack(_read_exact(fd, FRAME_PREFIX.size))
    if hlen > MAX_HEADER:
        raise ValueError("header too large")
    raw = _read_exact(fd, hlen)
    return json.loads(raw), raw, blen


def _read_frame(fd: int) -> tuple[dict[str, Any], list[bytes]]:
    _, raw, blen = _read_header(fd)
    return decode_frame_body(raw, _read_exact(fd, blen))


def _read_into(fd: int, view: memoryview) -> None:
    while view:
        n = os.readv(fd, [view[: 1 << 20]])
        if not n:
            raise EOFError
        view = view[n:]


def _write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


# ---------------------------------------------------------------------------------------------
# Everything below runs only inside the sandbox.
# ---------------------------------------------------------------------------------------------

CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWNET = 0x40000000
CLONE_NEWUSER = 0x10000000
PR_CAPBSET_DROP = 24
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
RUN_UID = 1000  # what a rootless run sees as its uid (and as the owner of /box)
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MNT_DETACH = 2
PR_SET_NO_NEW_PRIVS = 38
PR_SET_DUMPABLE = 4
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "riscv64": 41, "ppc64le": 203, "s390x": 217}
SIOCGIFFLAGS = 0x8913
SIOCSIFFLAGS = 0x8914

NEW_ROOT = "/tmp"  # a tmpfs is mounted here in the private mount namespace, then pivoted into
BOX = "/box"
MAIN_FILE = "main.py"  # what the languages call a Python program's file (dojo.sandbox.languages)
SIGINT = int(signal.SIGINT)  # a plain int: on a run's path, the enum member costs page faults to use
HIDDEN = "/.dojo-hidden"  # an empty file and an empty directory, mounted over what a run must not read
MQUEUE = "/dev/mqueue"  # the slot's POSIX message queues, as on any Linux system
SYSVIPC_LISTS = ("/proc/sysvipc/shm", "/proc/sysvipc/sem", "/proc/sysvipc/msg")
READ_WRITE_FILES = frozenset({"memory.max_usage_in_bytes"})  # cgroup files the zygote keeps open to write too
DEVICES = ("null", "zero", "full", "random", "urandom")
REHEARSAL = """
from typing import List


def has_close(numbers: List[float], threshold: float) -> bool:
    for i, a in enumerate(numbers):
        for j, b in enumerate(numbers):
            if i != j and abs(a - b) < threshold:
                return True
    return False


class Box:
    size: int = 1

    def grow(self, *args, **kwargs):
        return [i * 2 for i in range(10) if i % 2] + sorted({k: v for k, v in kwargs.items()})


assert has_close([1.0, 2.0, 3.9, 4.0], 0.3), f"{has_close!r}"
print(sum(int(x) for x in "1 2 3".split()), Box().grow(a=1), "done")
"""

# Imported once by the zygote so that runs do not pay for them; kept small (idle memory per slot).
PYTHON_PRELOAD = (
    "typing", "collections", "itertools", "functools", "math", "re", "heapq", "bisect", "string",
    "copy", "operator", "io", "traceback", "atexit", "threading", "random", "types", "linecache",
)  # fmt: skip


# What keeps numerical libraries from starting thread pools when the zygote imports them.
THREAD_POOL_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS",
                         "VECLIB_MAXIMUM_THREADS", "RAYON_NUM_THREADS", "POLARS_MAX_THREADS")  # fmt: skip


class RunLimits(TypedDict):
    """A run step's limits, as the host sends them (``dojo.sandbox.slot``)."""

    wall_s: float
    cpu_s: float
    memory_bytes: int
    output_bytes: int
    processes: int
    file_size_bytes: int
    open_files: int
    stack_bytes: NotRequired[int]  # a stack limit, when the host sets one
    address_space_extra: NotRequired[int]  # a runtime that maps more than it uses (the JVM, Go)


class RunStep(TypedDict, total=False):
    """One step of a request (``runtime.build_request``): a compile or the run."""

    role: str  # "compile" or "run" ("session" for a session's worker)
    limits: RunLimits
    stdin: bool  # whether the step reads the request's stdin
    argv: list[str]  # a program to execve
    inline_python: str  # or Python source run in the forked child (the file under /box)
    args: list[str]
    session_python: bool  # a session's exec, in its persistent interpreter
    code: str  # that exec's source
    cache_code: bool  # keep the compiled code for the next request with the same source
    preload: bool  # run the module's top level once per slot, then call its main()
    protect: bool  # a trusted harness: non-dumpable, signals blocked


class RunReply(TypedDict, total=False):
    """What a run step reports back: the raw facts the host turns into a verdict (``result.py``)."""

    role: str
    exit_code: int | None
    signal: int | None
    wall_s: float
    cpu_s: float
    peak_memory_bytes: int
    limit: str | None
    oom_killed: bool
    stdout_truncated: bool
    stderr_truncated: bool
    exec_error: str | None
    stdout_blob: int  # index of the blob holding the stream
    stderr_blob: int
    session_restarted: bool
    session_ended: bool


class SessionWorker(TypedDict):
    """A session's persistent interpreter: its process and the zygote's ends of its pipes."""

    pid: int
    pidfd: int
    ctl: int  # requests: frames of (code, stdin)
    status: int  # one frame per exec: its exit status, whether the interpreter ended
    out: int
    err: int
    exc: int  # a set-up failure's message
    limits: RunLimits


class Spare:
    """The next run's process, forked while the slot is idle (``Zygote.fork_spare``) so that a
    request does not wait for the fork: it blocks on ``ctl`` until the zygote sends it its step
    (``Zygote.start_spare``), then sets itself up exactly as a freshly forked run's child does.
    Forked after the last request was scrubbed, it never held any request's data. These are the
    zygote's ends; the spare holds the others."""

    def __init__(self, pid: int, ctl: int, stdin_w: int, out: int, err: int, exc: int, memfd: int,
                 cache_keys: frozenset[str]) -> None:  # fmt: skip
        self.pid = pid
        self.ctl = ctl  # the step, as one length-prefixed marshal message
        self.stdin_w = stdin_w  # the run's stdin pipe (unused when the stdin is private)
        self.out, self.err, self.exc = out, err, exc
        self.memfd = memfd  # a private stdin is spliced here (``Zygote.splice_to_memfd``)
        self.cache_keys = cache_keys  # the compiled main files the spare inherited

    def close(self) -> None:
        for fd in (self.ctl, self.stdin_w, self.out, self.err, self.exc, self.memfd):
            try:
                os.close(fd)
            except OSError:
                pass


# What a run's set-up does beyond the fixed steps (forker.c's flags; ``Zygote.setup_flags``).
SETUP_UNSHARE_IPC = 1  # a fresh IPC namespace (where the zygote cannot watch its own)
SETUP_JOIN_NETNS = 2  # the host's network namespace
SETUP_ROOTLESS = 4  # a nested user namespace instead of a uid change
SETUP_PROTECT = 8  # a trusted harness: not dumpable, every signal blocked
SETUP_RUN_FILTER = 16  # the run's own syscall filter, last


class Forker:
    """The zygote's end of its forker (``forker.c``, built on the host): a fork of the warm zygote
    that forks each one-shot run and sets it up in C, running no Python between runs, so neither it
    nor the zygote pays copy-on-write faults for the other's pages (the zygote, which forks nothing
    else, stops write-protecting its own). A run it forks is the zygote's child (CLONE_PARENT), set
    up as ``Zygote.child`` would, and continues in Python in ``Zygote.become_forked_run``.

    It is a snapshot of the zygote: it is forked again when what a run inherits from the zygote has
    changed since (a newly compiled main file, a new IPC namespace), and when it is gone (in
    rootless mode a run, being the same user, can kill or stop it: it is continued before each
    request and replaced if dead; it holds nothing a run could use)."""

    SETUP = struct.Struct("=IIiIIIQ" + "iiQQ" * 8 + "64s")  # forker.c's struct run_setup
    SETUP_VERSION = 1
    MAX_RLIMITS = 8
    PAYLOAD_CAPACITY = 1 << 16  # a run's message; a larger one (huge argv or env) is forked directly
    SOURCE_CAPACITY = 1 << 15  # a main file up to this size travels in the message (else the run reads it)
    PID_TIMEOUT_S = 10.0  # a fork takes milliseconds; past this the forker is replaced, the run a SandboxError

    def __init__(self, library: str, sys_: Syscalls) -> None:
        ctypes = sys_.ctypes
        # PyDLL: the GIL stays held (the zygote has one thread), so a run returns into Python whole
        self.serve_forks = ctypes.PyDLL(library, use_errno=True).dojo_forker_serve
        self.serve_forks.restype = ctypes.c_int
        self.serve_forks.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_void_p]
        # where the forker receives each run's message; a run reads it as a plain bytearray (a ctypes
        # read of it, ``string_at``, cost a fresh run's process ~40 page faults)
        self.payload = bytearray(self.PAYLOAD_CAPACITY)
        self.payload_view = (ctypes.c_char * self.PAYLOAD_CAPACITY).from_buffer(self.payload)
        self.ctypes = ctypes
        self.pid: int | None = None
        self.sock: Any = None
        self.snapshot: tuple[frozenset[str], int] = (frozenset(), 0)  # (code cache keys, IPC generation)
        self.environment: dict[str, str] | None = None
        self.random_state = 0  # where forker.c reseeds ``random`` (0: each run does it in Python)

    def random_state_address(self) -> int:
        """Where the ``random`` module's generator keeps its Mersenne Twister state in this process,
        for forker.c to reseed each run there; 0 unless ``random`` is loaded and the object's memory
        is laid out as forker.c assumes (checked against ``getstate()``, word for word)."""
        random = sys.modules.get("random")
        generator = getattr(random, "_inst", None)
        if generator is None or type(generator).__name__ != "Random":
            return 0
        _version, internal, gauss_next = generator.getstate()
        if gauss_next is not None or len(internal) != 625:
            return 0
        raw = self.ctypes.string_at(id(generator) + 16, 4 + 4 * 624)  # after the object's header
        index, *words = struct.unpack("=i624I", raw)
        return id(generator) + 20 if index == internal[624] and tuple(words) == internal[:624] else 0

    def alive(self) -> bool:
        """Whether the forker runs; reaps it if it died."""
        if self.pid is None:
            return False
        try:
            pid, _ = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            pid = self.pid
        if pid == 0:
            return True
        self.forget()
        return False

    def forget(self) -> None:
        if self.sock is not None:
            self.sock.close()
        self.pid, self.sock = None, None

    def stop(self) -> None:
        if self.pid is not None:
            try:
                os.kill(self.pid, 9)
                os.waitpid(self.pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
        self.forget()

    def spawn(self, zygote: Zygote) -> None:
        """Fork the forker from the zygote as it is now (replacing any earlier one)."""
        self.stop()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        theirs_fd = theirs.detach()
        self.random_state = self.random_state_address()
        pid = zygote.sys.fork()
        if pid == 0:  # pragma: no cover - the forker, then (returning from C) each run's process
            try:
                ours.detach()  # the zygote's end: closed below with the rest
                keep = sorted({0, 1, 2, theirs_fd, *((zygote.jail.host_netns,) if zygote.jail.host_netns else ())})
                low = 0
                for fd in keep:
                    if low < fd:  # (closerange(0, 0) closes every fd: close_range(0, UINT_MAX))
                        os.closerange(low, fd)
                    low = fd + 1
                os.closerange(low, 1 << 16)
                zygote.prepare_python_process(zygote.streams)  # for every run it forks, once
                length = self.serve_forks(theirs_fd, self.payload_view, self.PAYLOAD_CAPACITY, self.random_state)
                if length < 0:
                    os._exit(0)  # the zygote closed its end (or the forker could not start)
                zygote.become_forked_run(memoryview(self.payload)[:length])
            finally:
                os._exit(127)
        os.close(theirs_fd)
        self.pid, self.sock = pid, ours
        self.snapshot = (frozenset(zygote.code_cache), zygote.jail.ipc_generation)
        self.environment = dict(os.environ)

    def setup(self, zygote: Zygote, step: RunStep, req: dict[str, Any]) -> bytes:
        """The run's ``struct run_setup``: what ``Zygote.child`` does, as data."""
        flags = zygote.setup_flags(step, req)
        limits = zygote.run_rlimits(step)
        rows: list[int] = []
        for resource_, soft, hard in limits:
            rows += [resource_, 0, soft, hard]
        rows += [0, 0, 0, 0] * (self.MAX_RLIMITS - len(limits))
        address = self.ctypes.addressof(zygote.run_filter[0]) if zygote.run_filter is not None else 0
        uid = RUN_UID if zygote.rootless else zygote.uid
        netns = zygote.jail.host_netns if flags & SETUP_JOIN_NETNS and zygote.jail.host_netns is not None else -1
        return self.SETUP.pack(self.SETUP_VERSION, flags, netns, uid, len(limits), 0o022, address, *rows, BOX.encode())

    def send(self, parts: tuple[Any, ...], fds: tuple[int, int, int, int]) -> None:
        """Ask the forker for a run with ``fds`` as its stdin, stdout, stderr and set-up error pipe;
        ``parts``: the run's ``setup``, its marshalled message and, where it has one, its source
        (the forker's payload is the message and the source, one after the other). BrokenPipeError
        (or another ConnectionError) if the forker is gone."""
        if self.pid is None:
            raise BrokenPipeError("no forker")
        # Continued first: a run of the same user (rootless) or anyone on the host may have stopped
        # it, and a stopped forker held each run sent to it for PID_TIMEOUT_S (bench/soak.py's
        # SIGSTOP faults: every slot stalled in turn). One signal, no page touched.
        try:
            os.kill(self.pid, signal.SIGCONT)
        except ProcessLookupError as e:
            raise BrokenPipeError("the forker is gone") from e
        self.sock.sendmsg(parts, [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])

    def wait_pid(self, exc_r: int) -> int | None:
        """The run's pid, which it writes first on its set-up error pipe; None if no run was cloned
        (EOF with nothing written: the forker closed its copies of the message's fds, or died with
        the message unread); OSError if it could not fork it (it writes the negated errno), or did
        not within PID_TIMEOUT_S (it is killed then)."""
        poller = select.poll()
        poller.register(exc_r, select.POLLIN)
        if not poller.poll(self.PID_TIMEOUT_S * 1000):
            self.stop()
            raise OSError("the forker did not fork the run in time")
        raw = os.read(exc_r, 4)
        if not raw:
            return None
        if len(raw) != 4:
            raise OSError("the forker's run wrote a partial pid")
        pid = int.from_bytes(raw, sys.byteorder, signed=True)
        if pid <= 0:
            raise OSError(-pid, f"fork: {os.strerror(-pid)}")
        return pid


class Syscalls:
    """The part of the zygote that talks to the kernel through libc: mounts, namespaces, prctl and
    a fork without CPython's after-fork hooks. Every failure is an ``OSError`` naming the call."""

    def __init__(self) -> None:
        import ctypes

        self.ctypes = ctypes
        self.libc = ctypes.CDLL(None, use_errno=True)
        # ctypes makes a function object on first use; resolving the ones every child calls here
        # keeps that work (and its page faults) out of each run.
        self.libc.unshare, self.libc.setns  # noqa: B018
        # glibc's fork() without CPython's after-fork work (PyDLL: the GIL stays held across the
        # call). That work re-creates the locks other threads might have held, chiefly through the
        # threading module's hook, and in a child that only runs one program it writes ~150 pages
        # that have to be copied first: ~0.25 ms a run. The zygote never starts a thread, so its
        # interpreter is consistent in the child as it is; ``Zygote.fork_run`` does the one thing a
        # fresh process must have, a random seed of its own.
        self.raw_fork = ctypes.PyDLL(None, use_errno=True).fork
        self.raw_fork.restype = ctypes.c_int
        self.raw_fork.argtypes = []

    def check(self, ret: int, what: str) -> None:
        if ret != 0:
            err = self.ctypes.get_errno()
            raise OSError(err, f"{what}: {os.strerror(err)}")

    def mount(self, src: str | None, dst: str, fstype: str | None, flags: int, data: str = "") -> None:
        def b(s: str | None) -> bytes | None:
            return s.encode() if s else None

        self.check(
            self.libc.mount(b(src), b(dst), b(fstype), self.ctypes.c_ulong(flags), b(data)),
            f"mount {src} on {dst}",
        )

    def umount(self, path: str) -> None:
        self.check(self.libc.umount2(path.encode(), MNT_DETACH), f"umount {path}")

    def unshare(self, flags: int) -> None:
        self.check(self.libc.unshare(flags), "unshare")

    def setns(self, fd: int, nstype: int) -> None:
        self.check(self.libc.setns(fd, nstype), "setns")

    def prctl(self, option: int, arg: int) -> None:
        self.check(self.libc.prctl(option, self.ctypes.c_ulong(arg), 0, 0, 0), "prctl")

    def syscall_filter(self, program: bytes) -> Any:
        """A ``struct sock_fprog`` over the filter's instructions (built once, installed per run):
        an unsigned short count, padding, then the instructions' address (64-bit layout)."""
        ctypes = self.ctypes
        instructions = ctypes.create_string_buffer(program, len(program))
        address = ctypes.cast(instructions, ctypes.c_void_p).value or 0
        fprog = ctypes.create_string_buffer(struct.pack("=H6xQ", len(program) // 8, address), 16)
        return fprog, instructions  # the header and the instructions it points to, alive together

    def install_filter(self, fprog: Any) -> None:
        """Put this process (and every process it starts) under the syscall filter, for good."""
        self.check(self.libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, fprog[0], 0, 0), "seccomp")

    def fork(self) -> int:
        pid = self.raw_fork()
        if pid < 0:
            err = self.ctypes.get_errno()
            raise OSError(err, f"fork: {os.strerror(err)}")
        return int(pid)


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
    if failed and not memory_cgroup and (_out_of_memory(err) or max_rss >= 0.75 * lim["memory_bytes"]):
        return "memory"
    if sig == 25:  # SIGXFSZ
        return "file_size"
    return None


class CgroupHandle:
    """The slot's cgroups as the zygote sees them (v1: one directory per controller; v2: one for
    both): per-run memory and pids limits, the peak-memory counter, OOM kills."""

    def __init__(self, version: int) -> None:
        self.version = version
        self.controllers: dict[str, int] = {}  # controller -> directory fd
        self.files: dict[tuple[str, str], int] = {}  # (controller, file name) -> fd (``file``)
        self.mem_limit = -1
        self.pids_limit = -1
        self.peak_fd = -1

    def has(self, controller: str) -> bool:
        return controller in self.controllers

    def join(self, groups: dict[str, str]) -> None:
        """Move this process into each controller's group (the host made them) and keep a handle."""
        joined: dict[str, int] = {}
        for name, path in groups.items():
            if path not in joined:  # on v2 both controllers live in one directory
                with open(os.path.join(path, "cgroup.procs"), "w") as f:
                    f.write("0")
                joined[path] = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
            self.controllers[name] = joined[path]

    def file(self, controller: str, filename: str) -> int:
        """An open descriptor of one of the group's files, kept for the zygote's life: every run reads
        or writes a few of them (opening each anew cost 3 system calls a time). A run never holds
        one: every run's process closes all descriptors but its own four."""
        key = (controller, filename)
        fd = self.files.get(key)
        if fd is None:
            fd = self.files[key] = os.open(filename, os.O_RDWR if filename in READ_WRITE_FILES else os.O_RDONLY,
                                           dir_fd=self.controllers[controller])  # fmt: skip
        return fd

    def write(self, controller: str, filename: str, value: str) -> None:
        if controller not in self.controllers:
            return
        if filename in READ_WRITE_FILES:
            os.write(self.file(controller, filename), value.encode())
            return
        fd = os.open(filename, os.O_WRONLY, dir_fd=self.controllers[controller])
        try:
            os.write(fd, value.encode())
        finally:
            os.close(fd)

    def read(self, controller: str, filename: str) -> str:
        if controller not in self.controllers:
            return ""
        return os.pread(self.file(controller, filename), 65536, 0).decode()  # (from 0: the file afresh)

    def tasks(self) -> int | None:
        """How many tasks (threads of every process) the slot holds now; None without a pids group.
        A process counts until it is reaped, so this is exact for the zygote, which reaps them all."""
        if "pids" not in self.controllers:
            return None
        try:
            return int(self.read("pids", "pids.current"))
        except (OSError, ValueError):
            return None

    def memory_usage(self) -> int:
        if "memory" not in self.controllers:
            return 0
        name = "memory.usage_in_bytes" if self.version == 1 else "memory.current"
        return int(self.read("memory", name))

    def set_limits(self, lim: RunLimits, residents: int = 1) -> int:
        """Memory limit = what the group holds now (the zygote, the forker) + the run's limit;
        pids.max = the run's processes + the ``residents`` (the zygote, the forker).

        Returns the usage the limit was based on. A rewrite within 1 MiB of the last is skipped.
        """
        base = self.memory_usage()
        if "memory" in self.controllers and abs(base + lim["memory_bytes"] - self.mem_limit) > (1 << 20):
            self.mem_limit = base + lim["memory_bytes"]
            name = "memory.limit_in_bytes" if self.version == 1 else "memory.max"
            self.write("memory", name, str(self.mem_limit))
        if "pids" in self.controllers and lim["processes"] + residents != self.pids_limit:
            self.pids_limit = lim["processes"] + residents
            self.write("pids", "pids.max", str(self.pids_limit))
        return base

    def reset_peak(self, usage: int | None = None) -> int:
        """Reset the group's peak-memory counter; returns the usage now (``usage``, where the caller
        has just read it).

        v1: write 0 to memory.max_usage_in_bytes. v2: a write to memory.peak resets it only for
        reads through the same open file, so the zygote keeps one descriptor for it.
        """
        if "memory" in self.controllers:
            try:
                if self.version == 1:
                    self.write("memory", "memory.max_usage_in_bytes", "0")
                else:
                    if self.peak_fd < 0:
                        self.peak_fd = os.open("memory.peak", os.O_RDWR, dir_fd=self.controllers["memory"])
                    os.write(self.peak_fd, b"reset")
            except OSError:
                pass
        return self.memory_usage() if usage is None else usage

    def read_peak(self, base: int) -> int:
        if "memory" not in self.controllers:
            return 0
        try:
            if self.version == 1:
                raw = self.read("memory", "memory.max_usage_in_bytes")
            elif self.peak_fd >= 0:
                raw = os.pread(self.peak_fd, 64, 0).decode()
            else:
                return 0
            return max(0, int(raw) - base)
        except (OSError, ValueError):
            return 0

    def oom_kills(self) -> int:
        if "memory" not in self.controllers:
            return 0
        name = "memory.oom_control" if self.version == 1 else "memory.events"
        for line in self.read("memory", name).splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return 0


class Jail:
    """The slot's isolation, as the zygote builds and keeps it: the loopback interface, the new
    root (read-only binds, a minimal /dev, a fresh /proc, scratch tmpfs), the IPC namespace it
    watches, and the scratch space it wipes after each run."""

    def __init__(self, config: dict[str, Any], sys: Syscalls, uid: int) -> None:
        self.config = config
        self.sys = sys
        self.uid = uid
        self.host_netns: int | None = None
        self.disk_bytes: int = config.get("disk_bytes", 64 << 20)
        self.ipc_fds: list[int] = []
        self.ipc_generation = 0  # counts the IPC namespaces this zygote has moved to
        self.mqueue_empty_size = 0  # the size of the mqueue root with no queue in it (``ipc_in_use``)
        self.hidden: list[str] = []  # the paths masked for the current request (``hide``)
        # an empty scratch directory's size and what each entry adds, where tmpfs counts so (``wipe_scratch``)
        self.dir_sizes: tuple[int, int] | None = None
        self.box_files: list[str] | None = []  # what the zygote wrote in /box for the last request (None: unknown)

    def loopback_up(self) -> None:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            req = struct.pack("16sH14x", b"lo", 0)
            flags = struct.unpack("16sH14x", fcntl.ioctl(s, SIOCGIFFLAGS, req))[1]
            fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | 0x1 | 0x40))

    def build_root(self) -> None:
        if self.config.get("keep_host_netns"):
            self.host_netns = os.open(self.config["keep_host_netns"], os.O_RDONLY | os.O_CLOEXEC)
        self.sys.mount(None, "/", None, MS_REC | MS_PRIVATE)
        # Extra mounts' sources are held open first: the new root's tmpfs goes over the host's /tmp,
        # and a source under it (a store in a temporary directory) would be hidden by then.
        held = [(os.open(src, os.O_PATH | os.O_CLOEXEC), inside) for src, inside in self.config.get("mounts", [])]
        self.sys.mount("tmpfs", NEW_ROOT, "tmpfs", MS_NOSUID | MS_NODEV, "size=4m,mode=0755")
        r = NEW_ROOT
        ro_flags = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV
        binds: list[str] = ["/usr", "/etc", *self.config.get("extra_ro_paths", [])]
        for top in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
            host = "/" + top
            if os.path.islink(host):
                os.symlink(os.readlink(host), os.path.join(r, top))
            elif os.path.isdir(host):
                binds.append(host)
        for src in binds:
            if not os.path.exists(src):
                continue
            dst = r + src
            if os.path.isdir(src):
                os.makedirs(dst, exist_ok=True)
            else:
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                open(dst, "w").close()
            self.sys.mount(src, dst, None, MS_BIND)
            self.sys.mount(None, dst, None, ro_flags)
        for fd, inside in held:  # e.g. an environment at /env, read-only
            os.makedirs(r + inside, exist_ok=True)
            self.sys.mount(f"/proc/self/fd/{fd}", r + inside, None, MS_BIND | MS_REC)
            self.sys.mount(None, r + inside, None, ro_flags)
            os.close(fd)
        etc_files = self.config.get("etc_files") or {}
        if etc_files:  # the slot's own /etc/hosts and resolv.conf (a network policy's names)
            os.makedirs(r + "/.dojo")
            for name, text in etc_files.items():
                with open(f"{r}/.dojo/{name}", "w") as f:
                    f.write(text)
                os.chmod(f"{r}/.dojo/{name}", 0o644)
                if not os.path.exists(f"{r}/etc/{name}"):
                    continue  # /etc is read-only: a file it lacks cannot be shown
                self.sys.mount(f"{r}/.dojo/{name}", f"{r}/etc/{name}", None, MS_BIND)
                self.sys.mount(None, f"{r}/etc/{name}", None, ro_flags)
        # /dev: a few safe devices, nothing else.
        os.makedirs(r + "/dev", exist_ok=True)
        self.sys.mount("tmpfs", r + "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "size=64k,mode=0755")
        for dev in DEVICES:
            open(f"{r}/dev/{dev}", "w").close()
            self.sys.mount(f"/dev/{dev}", f"{r}/dev/{dev}", None, MS_BIND)
            self.sys.mount(None, f"{r}/dev/{dev}", None, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NOEXEC)
        for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"),
                             ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2")):  # fmt: skip
            os.symlink(target, f"{r}/dev/{name}")
        os.makedirs(r + "/dev/shm")
        os.makedirs(r + MQUEUE)
        os.makedirs(r + "/proc")
        self.sys.mount("proc", r + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        for d in ("tmp", "box"):
            os.makedirs(f"{r}/{d}")
        os.symlink("/tmp", f"{r}/mnt")  # scratch space where programs written for a container expect it
        os.makedirs(f"{r}{HIDDEN}/dir", mode=0o555)
        open(f"{r}{HIDDEN}/file", "w").close()
        os.chmod(f"{r}{HIDDEN}/file", 0o444)
        for path in self.config.get("masked", []):  # in a bound tree (dojo installed under /usr): empty
            self.mask(path, r)
        self.mount_scratch(r)
        os.chdir(r)
        machine = os.uname().machine
        if machine not in SYS_PIVOT_ROOT:
            raise OSError(f"unsupported architecture {machine}")
        self.sys.check(self.sys.libc.syscall(SYS_PIVOT_ROOT[machine], b".", b"."), "pivot_root")
        self.sys.umount(".")
        os.chdir("/")
        self.sys.mount(None, "/", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)

    def watch_ipc(self) -> None:
        """Open what lists the IPC objects of the zygote's current IPC namespace: the three SysV
        lists in /proc and a fresh mqueue mount. Runs share the zygote's namespace, and the zygote
        enters a new one only after a run that left an object behind (``drop_ipc_if_used``).
        Where this cannot be set up, every run gets its own IPC namespace instead (slower: making
        and freeing a namespace per run cost ~15% of ``print(1)`` throughput)."""
        for fd in self.ipc_fds:
            os.close(fd)
        self.ipc_fds = []
        try:
            try:
                self.sys.umount(MQUEUE)
            except OSError:
                pass  # nothing mounted yet
            self.sys.mount("mqueue", MQUEUE, "mqueue", MS_NOSUID | MS_NODEV | MS_NOEXEC)
            self.ipc_fds = [os.open(p, os.O_RDONLY | os.O_CLOEXEC) for p in (*SYSVIPC_LISTS, MQUEUE)]
            self.mqueue_empty_size = os.fstat(self.ipc_fds[-1]).st_size
        except OSError:
            for fd in self.ipc_fds:
                os.close(fd)
            self.ipc_fds = []

    def ipc_in_use(self) -> bool:
        """Whether the current IPC namespace holds a SysV segment, semaphore set or message queue,
        or a POSIX message queue."""
        *lists, mqueue = self.ipc_fds
        for fd in lists:
            if os.pread(fd, 1 << 16, 0).count(b"\n") > 1:  # a header line, then one line per object
                return True
        # the mqueue root grows by a fixed size per queue (ipc/mqueue.c), so its size says "empty" in
        # one call where listing it took eight
        return os.fstat(mqueue).st_size != self.mqueue_empty_size

    def drop_ipc_if_used(self) -> None:
        """Give later runs an empty IPC namespace if the last one left anything in this one."""
        if self.ipc_fds and self.ipc_in_use():
            self.sys.unshare(CLONE_NEWIPC)  # the old one goes with its last process (the forker, replaced)
            self.ipc_generation += 1
            self.watch_ipc()

    def hide(self, paths: list[str]) -> None:
        """Mount the empty file (or directory) read-only over each of ``paths`` for one request:
        its runs share this mount namespace and cannot unmount (the run filter refuses it), so
        they read nothing there. Absolute paths outside the scratch space (which each request wipes)
        only; one that is missing or a link is skipped. ``unhide`` undoes it."""
        for path in paths:
            scratch = any(path == d or path.startswith(d + "/") for d in (BOX, "/tmp", "/dev", "/proc", HIDDEN))
            if not path.startswith("/") or "/../" in path + "/" or scratch:
                raise ValueError(f"cannot hide {path!r}: an absolute path outside the scratch space is hidden")
            if self.mask(path):
                self.hidden.append(path)

    def mask(self, path: str, root: str = "") -> bool:
        """Mount the empty file or directory read-only over ``root + path`` (a file or a directory;
        anything else, a link or nothing, is left alone: False)."""
        import stat

        target = root + path
        try:
            mode = os.lstat(target).st_mode
        except OSError:
            return False
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            return False
        self.sys.mount(root + HIDDEN + ("/dir" if stat.S_ISDIR(mode) else "/file"), target, None, MS_BIND)
        try:
            self.sys.mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
        except OSError:
            self.sys.umount(target)
            raise
        return True

    def unhide(self) -> None:
        while self.hidden:
            self.sys.umount(self.hidden.pop())

    def mount_scratch(self, root: str = "") -> None:
        """Fresh tmpfs for /box (owned by the run uid), /tmp and /dev/shm."""
        size = self.disk_bytes
        uid = self.uid
        self.sys.mount("tmpfs", root + BOX, "tmpfs", MS_NOSUID | MS_NODEV,
                   f"size={size},nr_inodes=4096,mode=0755,uid={uid},gid={uid}")  # fmt: skip
        self.sys.mount("tmpfs", root + "/tmp", "tmpfs", MS_NOSUID | MS_NODEV,
                   f"size={size},nr_inodes=4096,mode=1777")  # fmt: skip
        self.sys.mount("tmpfs", root + "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV,
                   f"size={size},nr_inodes=1024,mode=1777")  # fmt: skip
        self.dir_sizes = self.probe_dir_sizes([root + "/tmp", root + "/dev/shm", root + BOX])
        self.box_files = []

    @staticmethod
    def probe_dir_sizes(directories: list[str]) -> tuple[int, int] | None:
        """The size of an empty tmpfs directory and what one entry adds to it, where a directory's
        size tells how many entries it holds: tmpfs counts a fixed size per entry, so one ``stat``
        replaces listing it. Checked on the fresh, empty mounts by adding and removing an entry;
        None where it does not hold (the scratch directories are then listed after every run)."""
        empty = os.stat(directories[0]).st_size
        probe = os.path.join(directories[0], ".dojo-probe")
        os.mkdir(probe)
        try:
            grown = os.stat(directories[0]).st_size
        finally:
            os.rmdir(probe)
        sizes = {os.stat(d).st_size for d in directories}
        return (empty, grown - empty) if grown > empty and sizes == {empty} else None

    def wipe_scratch(self, disk_bytes: int) -> None:
        """Empty /box, /tmp and /dev/shm for the next run.

        The common case (a few files left by the last run) is unlinked in place; anything more
        (directories, many entries, changed permissions, another size) gets fresh mounts.
        """
        box = os.stat(BOX)
        remount = disk_bytes != self.disk_bytes or box.st_mode & 0o7777 != 0o755
        if not remount:
            for d in (BOX, "/tmp", "/dev/shm"):
                if self.counted_empty(d, box.st_size if d == BOX else None):
                    continue  # (most runs leave nothing but the files they were given)
                with os.scandir(d) as it:
                    entries = list(it)
                if len(entries) > 16 or any(e.is_dir(follow_symlinks=False) for e in entries):
                    remount = True
                    break
                for e in entries:
                    os.unlink(e.path)
        if remount:
            for d in (BOX, "/tmp", "/dev/shm"):
                self.sys.umount(d)
            self.disk_bytes = disk_bytes
            self.mount_scratch()

    def counted_empty(self, directory: str, size: int | None) -> bool:
        """Whether ``directory`` is empty by its size alone (``dir_sizes``), after unlinking, in /box,
        the files the zygote wrote there: if its size says it holds exactly that many entries and
        each of them is still there to unlink, nothing else is. False where that cannot be told (the
        caller lists the directory)."""
        if self.dir_sizes is None:
            return False
        empty, entry = self.dir_sizes
        size = os.stat(directory).st_size if size is None else size
        if directory != BOX:
            return size == empty
        if self.box_files is None or size != empty + entry * len(self.box_files):
            return False
        try:
            for name in self.box_files:
                os.unlink(os.path.join(BOX, name))
        except OSError:  # renamed, replaced by a directory, ...: list what is there
            return False
        return True


class Zygote:
    def __init__(self, config: dict[str, Any]) -> None:

        self.config = config
        self.streams: tuple[Any, Any, Any] | None = None
        self.original_stdio: tuple[Any, ...] = ()
        self.rootless: bool = bool(config.get("rootless"))
        # Rootless: the zygote is root only inside its own user namespace (the caller outside), owns
        # every file it makes as uid 0, and each run enters a nested user namespace where that uid
        # appears as RUN_UID and nothing else exists.
        self.uid: int = 0 if self.rootless else config["uid"]
        self.sys = Syscalls()
        self.cgroup = CgroupHandle(config.get("cgroup_version", 1))
        self.jail = Jail(config, self.sys, self.uid)
        self.oom_count = 0
        self.sessions = Sessions(self)
        # The syscall filters (dojo.sandbox.seccomp builds them on the host): the zygote's, on
        # itself once set up (every run inherits it); a run's own, only where the host sends one.
        filters = config.get("seccomp") or {}
        self.zygote_filter = self.sys.syscall_filter(bytes.fromhex(filters["zygote"])) if filters else None
        self.run_filter = self.sys.syscall_filter(bytes.fromhex(filters["run"])) if filters.get("run") else None
        self.vm_size = 0
        self.code_cache: dict[str, Any] = {}
        self.environment: dict[str, str] | None = None
        self.cached_code: Any = None
        self.request_body: bytearray | None = None
        self.private_stdin: int | None = None
        self.cached_key: str | None = None
        self.main_source: memoryview | None = None  # the step's main file as sent (``sent_source``)
        # the next run's process, forked while idle (``fork_spare``); off for a session's slot
        self.spare: Spare | None = None
        self.spares: bool = bool(config.get("spare", False))
        self.splice_pipe: tuple[int, int] | None = None
        # The forker (forker.c) where the host built it, loaded now, while its path is visible; not
        # with spares, which are forked from the zygote itself.
        self.forker: Forker | None = None
        self.previous_env: dict[str, str] | None = None  # the last run's environment (``fork_or_start``)
        self.forker_error: str | None = None
        if config.get("forker") and not self.spares:
            try:
                self.forker = Forker(config["forker"], self.sys)
            except OSError as e:
                self.forker_error = f"{type(e).__name__}: {e}"
        self.blockable_signals = signal.valid_signals() - {signal.SIGKILL, signal.SIGSTOP}

    # -- set-up --------------------------------------------------------------------------------

    def preload(self) -> None:
        """Import common modules and rehearse one run, so children start on warm memory.

        Page faults are what a forked child pays for (several microseconds each in a VM): the
        first ``compile()`` or stream set-up in a fresh process touches a few hundred new pages.
        Doing it once here leaves those paths warm for every child (1.4 ms -> 0.1 ms measured).
        """
        import gc
        import importlib
        import io

        for name in PYTHON_PRELOAD:
            try:
                importlib.import_module(name)
            except ImportError:
                pass
        null = os.open("/dev/null", os.O_RDWR)
        saved = sys.stdout
        try:
            for _ in range(3):
                out = io.TextIOWrapper(io.BufferedWriter(io.FileIO(null, "w", closefd=False)),
                                       encoding="utf-8", errors="surrogateescape")  # fmt: skip
                code = compile(REHEARSAL, "/box/main.py", "exec", dont_inherit=True)
                sys.stdout = out
                exec(code, {"__name__": "__rehearsal__", "__builtins__": builtins})
                out.flush()
        finally:
            sys.stdout = saved
            os.close(null)
        gc.collect()
        gc.freeze()  # forked children never scan (and so never copy) the zygote's objects
        self.sys.libc.malloc_trim(0)  # give freed heap back: idle memory per slot is what scales
        self.vm_size = self._vm_size()

    def preload_environment(self) -> None:
        """An environment's slot: its packages on ``sys.path`` and the modules it declares imported
        here, once, so every run forks with them (``import pandas`` costs a run nothing). Their
        thread pools are held at one thread: the zygote must stay single-threaded to fork."""
        paths = list(self.config.get("python_paths") or [])
        sys.path[0:0] = paths
        modules = list(self.config.get("preload_modules") or [])
        if not modules and not self.config.get("warmup"):
            return
        import importlib

        for var in THREAD_POOL_VARIABLES:
            os.environ[var] = "1"
        for name in modules:
            try:
                importlib.import_module(name)
            except BaseException as e:
                why = f"{type(e).__name__}: {e}"
                raise RuntimeError(f"the environment's module {name!r} failed to import: {why}") from e
        warmup = self.config.get("warmup") or ""
        if warmup:
            try:
                exec(compile(warmup, "<environment warm-up>", "exec"), {"__name__": "__dojo_warmup__"})
            except BaseException as e:
                raise RuntimeError(f"the environment's warm-up failed: {type(e).__name__}: {e}") from e
        threads = len(os.listdir("/proc/self/task"))
        if threads != 1:
            raise RuntimeError(
                f"importing {', '.join(modules)} started {threads - 1} thread(s) in the zygote; a slot can only "
                "fork single-threaded: leave that module out of the preload list"
            )

    @staticmethod
    def build_streams() -> tuple[Any, Any, Any]:
        """A Python run's stdin, stdout and stderr over fds 0, 1 and 2, as the interpreter makes them."""
        import io

        stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)),
                                 encoding="utf-8", errors="surrogateescape")  # fmt: skip
        stdout = io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, "w", closefd=False)),
                                  encoding="utf-8", errors="surrogateescape")  # fmt: skip
        stderr = io.TextIOWrapper(io.BufferedWriter(io.FileIO(2, "w", closefd=False)),
                                  encoding="utf-8", errors="backslashreplace", line_buffering=True)  # fmt: skip
        return stdin, stdout, stderr

    def prebuild_streams(self) -> None:
        """Build every run's stdio objects once, here, over pipes (so that what they learn of their
        fds, e.g. not seekable, is what a run's pipes would tell), then point fds 0-2 back at
        /dev/null. The zygote never uses them; each child inherits them empty. Building them in
        every child cost ~80 page faults (~0.2 ms) per run."""
        r, w = os.pipe()
        try:
            os.dup2(r, 0)
            os.dup2(w, 1)
            os.dup2(w, 2)
            streams = self.build_streams()  # each wrapper asks, and caches, seekable() here
        finally:
            os.close(r)
            os.close(w)
            null = os.open("/dev/null", os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            os.close(null)
        self.streams = streams
        # Each child points sys.__stdin__ & co. at these streams; the zygote keeps the interpreter's
        # own objects alive so that no child pays for deallocating them (~25 page faults).
        self.original_stdio = (sys.__stdin__, sys.__stdout__, sys.__stderr__)

    @staticmethod
    def _vm_size() -> int:
        """This process's address space in bytes (an inline run's RLIMIT_AS starts from it)."""
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
        return 0

    def setup(self) -> None:
        self.cgroup.join(self.config.get("cgroups", {}))
        socket.sethostname("dojo")
        self.jail.loopback_up()
        self.jail.build_root()
        self.jail.watch_ipc()
        if self.cgroup.version == 1 and self.cgroup.has("memory"):
            try:
                self.cgroup.write("memory", "memory.swappiness", "0")
            except OSError:
                pass
        elif self.cgroup.has("memory"):
            try:
                self.cgroup.write("memory", "memory.swap.max", "0")
            except OSError:
                pass
        self.oom_count = self.cgroup.oom_kills()
        # No run may gain privileges through execve (setuid files, file capabilities). The zygote
        # itself never execs, so it sets this once and every child inherits it.
        self.sys.prctl(PR_SET_NO_NEW_PRIVS, 1)
        try:  # needs CAP_SYS_RESOURCE; without it, children at +1000 are still chosen first
            with open("/proc/self/oom_score_adj", "w") as f:
                f.write("-1000")
        except OSError:
            pass
        self.prebuild_streams()
        self.preload_environment()
        self.preload()
        self.use_environment({})
        if self.zygote_filter is not None:  # from here on, for the zygote and every run it forks
            self.sys.install_filter(self.zygote_filter)
        # As PID 1 the zygote never sees what its namespace sends it without a handler; Python's
        # SIGINT handler would let a run (rootless: the same user) raise KeyboardInterrupt in it
        # and end the slot. Each Python run gets the handler back (``child``).
        set_signal(signal.SIGINT, signal.SIG_DFL)
        if self.forker is not None:
            self.forker.spawn(self)

    # -- one request ---------------------------------------------------------------------------

    def read_request(self, fd: int) -> tuple[dict[str, Any], list[Any]]:
        """Read one request frame so that no run's data outlives its request in this process.

        Every run's process is a fork of this one and can read its whole address space, so:
        the blobs are read into one buffer that ``scrub`` zeroes after the request (a later run
        finds no earlier run's files or stdin in freed memory); and a private stdin
        (``stdin_private``: a grading harness's job) is spliced from the request pipe into a
        memfd by the kernel, never entering this process at all, and becomes the run's fd 0.
        """
        header, _, blen = _read_header(fd)
        lengths = header.get("blobs", [])
        if sum(lengths) != blen:
            raise ValueError("frame body length does not match its blob table")
        private = header.get("stdin_blob") if header.get("stdin_private") else None
        body = bytearray(blen - (lengths[private] if private is not None else 0))
        view = memoryview(body)
        blobs: list[Any] = []
        offset = 0
        for i, n in enumerate(lengths):
            if i == private:
                self.private_stdin = self.splice_to_memfd(fd, n)
                blobs.append(b"")
                continue
            _read_into(fd, view[offset : offset + n])
            blobs.append(view[offset : offset + n])
            offset += n
        self.request_body = body
        return header, blobs

    def splice_to_memfd(self, fd: int, n: int) -> int:
        """Move ``n`` bytes from the request stream ``fd`` into a new memfd without copying them
        through this process's memory; the memfd, positioned at 0. The stream may be a pipe or a
        socket (uvloop hands subprocesses socketpairs), so the bytes go through a pipe of ours:
        the kernel splices a socket into a pipe and a pipe into a file, not a socket into a file."""
        if self.splice_pipe is None:
            self.splice_pipe = os.pipe2(os.O_CLOEXEC)
        pipe_r, pipe_w = self.splice_pipe
        # the spare's memfd when there is one (it holds that file open as its stdin-to-be)
        memfd = os.dup(self.spare.memfd) if self.spare is not None else os.memfd_create("stdin", os.MFD_CLOEXEC)
        try:
            while n:
                moved = os.splice(fd, pipe_w, min(n, 1 << 16))
                if not moved:
                    raise EOFError
                n -= moved
                while moved:
                    moved -= os.splice(pipe_r, memfd, moved)
            os.lseek(memfd, 0, os.SEEK_SET)
        except BaseException:
            os.close(memfd)
            raise
        return memfd

    def scrub(self) -> None:
        """Zero the last request's blobs and drop its private stdin (see ``read_request``)."""
        body, self.request_body = self.request_body, None
        self.main_source = None
        if body:
            body[:] = bytes(len(body))
        if self.private_stdin is not None:
            os.close(self.private_stdin)
            self.private_stdin = None

    def use_environment(self, env: dict[str, str]) -> None:
        """Make the zygote's environment exactly ``env``, so an in-process Python run inherits it as
        it is. Requests rarely change it; setting it here rather than in each child saves every run
        ~50 page faults of putenv() and dict work."""
        if env != self.environment:
            os.environ.clear()
            os.environ.update(env)
            self.environment = dict(env)

    def handle(self, header: dict[str, Any], blobs: list[bytes]) -> tuple[dict[str, Any], list[bytes]]:
        """One request. Paths it ``hidden`` are masked while it runs (``Jail.hide``); a session's
        processes outlive its requests, so a session cannot hide anything."""
        hidden = header.get("hidden") or []
        if not hidden:
            return self.handle_request(header, blobs)
        if header.get("keep_files"):
            raise ValueError("a session cannot hide paths: its processes outlive the request")
        try:
            self.jail.hide(hidden)
            return self.handle_request(header, blobs)
        finally:
            self.reap_all()  # nothing of the request's runs may see the paths again
            self.jail.unhide()

    def handle_request(self, header: dict[str, Any], blobs: list[bytes]) -> tuple[dict[str, Any], list[bytes]]:
        out_blobs: list[bytes] = []
        self.marks = [("start", time.perf_counter())]
        if header.get("keep_files"):  # a session: the work dir is the program's; write as its uid
            self.spares = False  # a session's slot: its processes are the session's own
            self.discard_spare()
            self.jail.box_files = None  # the session's files: /box is listed when it is next wiped
            self.write_files_as_user(header.get("files", []), blobs)
        else:
            self.jail.wipe_scratch(int(header.get("disk_bytes", self.jail.disk_bytes)))
            self.marks.append(("wiped", time.perf_counter()))
            files = header.get("files", [])
            self.jail.box_files = [f["path"] for f in files] if all("/" not in f["path"] for f in files) else None
            for f in files:  # a fresh /box: written as root, handed to the run uid
                path = os.path.join(BOX, f["path"])
                self.makedirs_owned(os.path.dirname(path))
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, f.get("mode", 0o644))
                try:
                    os.fchown(fd, self.uid, self.uid)
                    _write_all(fd, blobs[f["blob"]])
                finally:
                    os.close(fd)
        stdin = blobs[header["stdin_blob"]] if header.get("stdin_blob") is not None else b""
        steps_out = []
        step: RunStep
        for index, step in enumerate(header["steps"]):
            if step.get("session_python"):
                res, so, se = self.sessions.run(step, stdin, header)
            else:
                self.cache_main(step, header, blobs)
                # the first step's main file is on disk exactly as sent: its source can travel with the run
                self.main_source = self.sent_source(step, header, blobs) if index == 0 else None
                res, so, se = self.run_step(step, stdin if step.get("stdin") else b"", header)
            res["stdout_blob"] = len(out_blobs)
            out_blobs.append(so)
            res["stderr_blob"] = len(out_blobs)
            out_blobs.append(se)
            steps_out.append(res)
            ok = res["exit_code"] == 0 and res["limit"] is None and res["exec_error"] is None
            if not ok and step.get("role") == "compile":
                break
        fetched = []
        if header.get("fetch"):
            fetched = self.fetch(header["fetch"], int(header.get("fetch_max_bytes", 1 << 20)), out_blobs)
        self.marks.append(("end", time.perf_counter()))
        t0 = self.marks[0][1]
        timings = {name: round((t - t0) * 1e6) for name, t in self.marks}
        return {"steps": steps_out, "fetched": fetched, "timings_us": timings}, out_blobs

    def run_step(self, step: RunStep, stdin: bytes, req: dict[str, Any]) -> tuple[RunReply, bytes, bytes]:
        lim: RunLimits = step["limits"]
        oom_before = self.oom_count
        mem_base = self.cgroup.set_limits(lim, residents=1 if self.forker is None else 2)
        self.cgroup.reset_peak(mem_base)

        private = bool(step.get("stdin") and self.private_stdin is not None)
        spare = self.take_spare()
        start = time.monotonic()
        if spare is not None and self.start_spare(spare, step, req, private):
            pid, in_w, out_r, err_r, exc_r = spare.pid, spare.stdin_w, spare.out, spare.err, spare.exc
            os.close(spare.ctl)
            os.close(spare.memfd)
            if private:
                assert self.private_stdin is not None
                os.close(self.private_stdin)  # the spare reads its own copy of the memfd
                self.private_stdin, stdin = None, b""
                os.close(in_w)
                in_w = -1
        else:
            if private:  # the run reads a memfd this process never read (read_request)
                assert self.private_stdin is not None
                in_r, in_w, stdin = self.private_stdin, -1, b""
                self.private_stdin = None
            else:
                in_r, in_w = os.pipe2(os.O_CLOEXEC)
            out_r, out_w = os.pipe2(os.O_CLOEXEC)
            err_r, err_w = os.pipe2(os.O_CLOEXEC)
            sys.stdout.flush()
            sys.stderr.flush()
            self.marks.append(("fork", time.perf_counter()))
            start = time.monotonic()
            pid, exc_r = self.fork_or_start(step, req, (in_r, out_w, err_w))
        pidfd = os.pidfd_open(pid)
        capture = Capture(lim["output_bytes"])
        limit: str | None = None
        deadline = start + lim["wall_s"]
        poller = select.poll()
        fds = {out_r: "stdout", err_r: "stderr"}
        for fd in fds:
            os.set_blocking(fd, False)
            poller.register(fd, select.POLLIN)
        poller.register(pidfd, select.POLLIN)
        pending = memoryview(stdin)
        if pending:
            os.set_blocking(in_w, False)
            poller.register(in_w, select.POLLOUT)
        elif in_w >= 0:
            os.close(in_w)
            in_w = -1
        exited = False
        open_fds = set(fds)
        killed_all = False
        while open_fds or not exited:
            timeout = deadline - time.monotonic()
            if timeout <= 0:
                if limit is None and not exited:
                    limit = "wall"
                self.kill_all()
                killed_all = True
                deadline = time.monotonic() + 5.0
                if exited:
                    break
                timeout = 5.0
            for fd, _event in poller.poll(timeout * 1000):
                if fd == pidfd:
                    exited = True
                    self.marks.append(("exited", time.perf_counter()))
                    poller.unregister(pidfd)
                    # Drain what is buffered now, then kill leftovers (background children
                    # holding the pipes open) so the reads below reach EOF promptly.
                    for rfd in list(open_fds):
                        if not capture.drain(rfd, fds[rfd]):
                            open_fds.discard(rfd)
                            poller.unregister(rfd)
                    if open_fds and not killed_all:
                        self.kill_all()
                        killed_all = True
                elif fd == in_w:
                    try:
                        n = os.write(in_w, pending[: 1 << 16])
                        pending = pending[n:]
                    except (BlockingIOError, InterruptedError):
                        continue
                    except OSError:  # EPIPE: the program stopped reading
                        pending = pending[:0]
                    if not pending:
                        poller.unregister(in_w)
                        os.close(in_w)
                        in_w = -1
                elif fd in open_fds:
                    if not capture.drain(fd, fds[fd]):
                        open_fds.discard(fd)
                        poller.unregister(fd)
                    if capture.over_cap and limit is None:
                        limit = "output"
                        self.kill_all()
                        killed_all = True
        for fd in (*open_fds, out_r, err_r):
            try:
                os.close(fd)
            except OSError:
                pass
        if in_w >= 0:
            os.close(in_w)
        self.marks.append(("eof", time.perf_counter()))
        _, status, ru = os.wait4(pid, 0)
        wall = time.monotonic() - start
        os.close(pidfd)
        self.reap_all()
        self.marks.append(("reaped", time.perf_counter()))
        exec_error = os.read(exc_r, 4096).decode(errors="replace") or None
        os.close(exc_r)
        cpu = ru.ru_utime + ru.ru_stime
        exit_code = os.waitstatus_to_exitcode(status)
        sig = -exit_code if exit_code < 0 else None
        self.oom_count = self.cgroup.oom_kills()
        oom = self.oom_count > oom_before
        limit = classify_limit(limit, lim, memory_cgroup=self.cgroup.has("memory"), sig=sig, cpu=cpu, oom=oom,
                               failed=exit_code != 0, err=capture.err, max_rss=ru.ru_maxrss * 1024)  # fmt: skip
        peak = self.cgroup.read_peak(mem_base) or ru.ru_maxrss * 1024
        res: RunReply = {
            "role": step.get("role", "run"),
            "exit_code": exit_code if exit_code >= 0 else None,
            "signal": sig,
            "wall_s": wall,
            "cpu_s": cpu,
            "peak_memory_bytes": peak,
            "limit": limit,
            "oom_killed": oom,
            "stdout_truncated": capture.truncated["stdout"],
            "stderr_truncated": capture.truncated["stderr"],
            "exec_error": exec_error,
        }
        return res, bytes(capture.out), bytes(capture.err)

    def fork_or_start(self, step: RunStep, req: dict[str, Any], fds: tuple[int, int, int]) -> tuple[int, int]:
        """A run's process, with ``fds`` as its stdin, stdout and stderr (closed here once the run has
        them): from the forker where there is one, else forked here and set up by ``child``. Its pid,
        and the read end of its set-up error pipe (the run writes its pid there first, then any
        set-up or exec error)."""
        forker = self.forker
        env = req.get("env") or {}
        try:
            if forker is not None and step.get("role") != "session":
                keys, generation = forker.snapshot
                stale = (self.cached_key is not None and self.cached_key not in keys) or (
                    generation != self.jail.ipc_generation
                )
                # A run whose environment is not the forker's sets its own (~80 page faults); the same
                # environment twice running becomes the forker's (so alternating ones never thrash).
                if env != forker.environment and env == self.previous_env:
                    self.use_environment(env)
                    stale = True
                self.previous_env = env
                if stale or not forker.alive():
                    forker.spawn(self)
                source = self.main_source if not step.get("argv") else None
                # (argv, env) for a program, else (file, args, code cache key, env or None, source length
                # or None): a tuple, whose loading in the run costs fewer page faults than a dict's
                source_len = len(source) if source is not None else None
                run = (step["argv"], env) if step.get("argv") else (
                    step["inline_python"], list(step.get("args") or []), self.cached_key,
                    env if env != forker.environment else None, source_len)  # fmt: skip
                message = marshal.dumps(run)
                if len(message) + (source_len or 0) <= forker.PAYLOAD_CAPACITY:
                    setup = forker.setup(self, step, req)
                    parts = (setup, message) if source is None else (setup, message, source)
                    # The stdio fds stay ours until the run has them, so that the run can be sent
                    # again; each try has an error pipe of its own, whose EOF with nothing written
                    # says no run was cloned (a run writes its pid first): then, and only then, the
                    # forker died before it read the message (rootless: a run killed it) and a
                    # resend cannot start the run twice.
                    for _ in range(2):
                        exc_r, exc_w = os.pipe2(os.O_CLOEXEC)
                        try:
                            try:
                                forker.send(parts, (*fds, exc_w))
                            except (BrokenPipeError, ConnectionError):  # it died since (rootless: a run killed it)
                                forker.spawn(self)
                                forker.send(parts, (*fds, exc_w))
                        finally:
                            os.close(exc_w)
                        try:
                            pid = forker.wait_pid(exc_r)
                        except BaseException:
                            os.close(exc_r)
                            raise
                        if pid is not None:
                            return pid, exc_r
                        os.close(exc_r)
                        forker.spawn(self)
                    raise OSError("the forker did not fork the run (twice)")
            self.use_environment(env)
            exc_r, exc_w = os.pipe2(os.O_CLOEXEC)
            pid = self.fork_run()
            if pid == 0:  # pragma: no cover - the child never returns
                self.become_run(step, req, *fds, exc_w)
            os.close(exc_w)
            return pid, exc_r
        finally:
            for fd in fds:
                os.close(fd)

    def become_forked_run(self, message: memoryview) -> None:
        """In a run's process the forker made and set up (``Forker``): run it; never returns."""
        try:
            run = marshal.loads(message)  # (see ``fork_or_start``)
            set_signal(SIGINT, _signal.default_int_handler)  # Python's own (the zygote's is SIG_DFL)
            if len(run) == 2:
                self.exec_program(*run)
            filename, args, key, env, n = run
            if env is not None:
                self.use_environment(env)
            cached = self.code_cache[key] if key is not None else None
            source = message[len(message) - n :] if n is not None else None  # (the payload's last n bytes)
            reseeded = self.forker is not None and self.forker.random_state != 0
            self.run_python_inline(filename, args, cached, source=source, forked=True, reseeded=reseeded)
        except BaseException as e:
            try:
                os.write(3, f"{type(e).__name__}: {e}".encode()[:4000])
            finally:
                os._exit(127)
        os._exit(127)

    @staticmethod
    def exec_program(argv: list[str], env: dict[str, str]) -> None:
        for sig in (signal.SIGPIPE, signal.SIGXFSZ):  # Python ignores these; programs expect defaults
            set_signal(sig, signal.SIG_DFL)
        os.execve(argv[0], argv, dict(env))

    def become_run(self, step: RunStep, req: dict[str, Any], in_r: int, out_w: int, err_w: int, exc_w: int) -> None:
        """In a run's freshly forked (or spare) process: set it up and run it; never returns. A
        set-up failure is reported to the zygote on ``exc_w``."""
        try:
            self.child(step, step["limits"], req, in_r, out_w, err_w, exc_w)
        except BaseException as e:
            try:
                os.write(exc_w, f"{type(e).__name__}: {e}".encode()[:4000])
            finally:
                os._exit(127)
        os._exit(127)

    # -- the spare: the next run's process, forked while idle ----------------------------------

    def fork_spare(self, protocol_fds: tuple[int, ...]) -> None:
        """Fork the next run's process now, while nothing waits for it (a fork of a zygote that
        has imported pandas costs milliseconds). Skipped where it could not be used: a session's
        slot, or when a spare is already there. A fork that fails leaves no spare."""
        if not self.spares or self.spare is not None or self.sessions.worker is not None:
            return
        pipes = [os.pipe2(os.O_CLOEXEC) for _ in range(5)]  # ctl, stdin, stdout, stderr, set-up errors
        memfd = os.memfd_create("stdin", os.MFD_CLOEXEC)
        (ctl_r, ctl_w), (in_r, in_w), (out_r, out_w), (err_r, err_w), (exc_r, exc_w) = pipes
        try:
            pid = self.fork_run()
        except OSError:
            for fd in (memfd, *(fd for pair in pipes for fd in pair)):
                os.close(fd)
            return
        if pid == 0:  # pragma: no cover - the spare never returns
            try:
                for fd in (ctl_w, in_w, out_r, err_r, exc_r, *protocol_fds):
                    os.close(fd)
                (n,) = struct.unpack("<I", _read_exact(ctl_r, 4))
                message = marshal.loads(_read_exact(ctl_r, n))
                os.close(ctl_r)
            except BaseException:  # EOF: the zygote discarded this spare
                os._exit(0)
            step, req = message["step"], message["req"]
            key = message["key"]
            self.cached_code = self.code_cache[key] if key is not None else None
            self.use_environment(req.get("env") or {})
            if message["private"]:
                os.close(in_r)
                in_r = memfd
            else:
                os.close(memfd)
            self.become_run(step, req, in_r, out_w, err_w, exc_w)
        for fd in (ctl_r, in_r, out_w, err_w, exc_w):
            os.close(fd)
        self.spare = Spare(pid, ctl_w, in_w, out_r, err_r, exc_r, memfd, frozenset(self.code_cache))

    def take_spare(self) -> Spare | None:
        """The spare for this step, or None (a fresh fork then): it must have inherited the step's
        compiled main file. A spare that cannot serve is discarded."""
        spare, self.spare = self.spare, None
        if spare is not None and self.cached_key is not None and self.cached_key not in spare.cache_keys:
            self.discard(spare)
            return None
        return spare

    def start_spare(self, spare: Spare, step: RunStep, req: dict[str, Any], private: bool) -> bool:
        """Send the spare its step; False (the spare discarded) if it is gone."""
        try:
            message = marshal.dumps({"step": dict(step), "key": self.cached_key, "private": private,
                                     "req": {"env": req.get("env") or {}, "network": req.get("network")}})  # fmt: skip
        except ValueError:  # not marshallable: cannot happen for a step built by the host
            self.discard(spare)
            return False
        sent = time.perf_counter()
        try:
            _write_all(spare.ctl, struct.pack("<I", len(message)) + message)
        except OSError:  # EPIPE: it died (it is killed with everything else on an error)
            self.discard(spare)
            return False
        self.marks.append(("spare", sent))  # (only a spare that took its step: else the run is forked)
        return True

    def discard_spare(self) -> None:
        spare, self.spare = self.spare, None
        if spare is not None:
            self.discard(spare)

    @staticmethod
    def discard(spare: Spare) -> None:
        spare.close()
        try:
            os.kill(spare.pid, 9)
            os.waitpid(spare.pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass

    def fork_run(self) -> int:
        """``os.fork()`` for a run's process, without CPython's after-fork hooks (see ``Syscalls``).
        The child reseeds ``random`` itself (``run_python_inline``)."""
        if _thread._count():  # never the case; another thread would make the hooks necessary
            return os.fork()
        return self.sys.fork()

    def kill_all(self) -> list[int]:
        """SIGKILL every other process of the namespace but the forker. The pids signalled, found in
        /proc, where there is a forker to spare; else ``kill(-1)`` (every process but PID 1) and []."""
        if self.forker is None or self.forker.pid is None:
            try:
                os.kill(-1, 9)  # as PID 1 of the namespace: every process but ourselves
            except ProcessLookupError:
                pass
            return []
        if self.cgroup.tasks() == 2:  # the zygote and the forker, nothing else: no need to look
            return []
        forker = self.forker.pid
        others = [pid for pid in map(int, filter(str.isdigit, os.listdir("/proc"))) if pid not in (1, forker)]
        for pid in others:
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
        return others

    def reap_all(self) -> None:
        """Kill and reap every other process of the namespace (a spare included, the forker not),
        until none is left; then make sure no IPC object of theirs outlives them."""
        if self.spare is not None:
            self.spare.close()
            self.spare = None
        if self.forker is not None and self.forker.alive():
            self.reap_all_but_the_forker()
        else:
            while True:
                self.kill_all()
                try:
                    pid, _ = os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:
                    break
                if pid == 0:
                    try:
                        os.waitpid(-1, 0)
                    except ChildProcessError:
                        break
        self.jail.drop_ipc_if_used()

    def reap_all_but_the_forker(self) -> None:
        """Kill and reap every process of the namespace but the forker (a child of ours that
        ``waitpid(-1)`` would wait for forever). A process whose parent still lives is not ours to
        reap: it is ours once that parent dies, on a later pass."""
        while others := self.kill_all():
            reaped = False
            for pid in others:
                try:
                    os.waitpid(pid, 0)
                    reaped = True
                except ChildProcessError:
                    pass
            if not reaped:
                time.sleep(0.0005)

    def fetch(self, paths: list[str], max_bytes: int, out_blobs: list[bytes]) -> list[dict[str, Any]]:
        """Read requested files as the run uid (never as root: a symlink must not leak host files).
        Only regular files: a FIFO the run left at the path would block the read forever (the slot
        would die, and a repo grading read as an infrastructure error: a forger's way to dodge a
        score of 0), a device would read without end. They are opened without waiting."""

        def work() -> tuple[list[dict[str, Any]], list[bytes]]:
            results: list[dict[str, Any]] = []
            blobs: list[bytes] = []
            for p in paths:
                try:
                    fd = os.open(os.path.join(BOX, p), os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
                    with open(fd, "rb") as f:
                        if not stat.S_ISREG(os.fstat(fd).st_mode):
                            raise OSError(errno.EINVAL, "not a regular file")
                        data = f.read(max_bytes + 1)
                    results.append({"path": p, "blob": len(blobs), "truncated": len(data) > max_bytes})
                    blobs.append(data[:max_bytes])
                except OSError as e:
                    results.append({"path": p, "blob": None, "error": e.strerror or str(e)})
            return results, blobs

        fetched, blobs = self.as_user(work)
        for item in fetched:
            if item.get("blob") is not None:
                item["blob"] = len(out_blobs) + item["blob"]
        out_blobs.extend(blobs)
        return list(fetched)

    def makedirs_owned(self, path: str) -> None:
        """Create the missing directories of ``path`` (under /box), owned by the run uid."""
        if path == BOX or os.path.isdir(path):
            return
        self.makedirs_owned(os.path.dirname(path))
        os.mkdir(path)
        os.chown(path, self.uid, self.uid)

    def as_user(self, work: Any) -> tuple[Any, list[bytes]]:
        """Run ``work()`` in a child with the slot's uid; it returns (JSON-able value, blobs)."""
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover
            status = 0
            try:
                os.close(r)
                self.become_run_user()
                os.umask(0o022)
                value, blobs = work()
                _write_all(w, encode_frame({"value": value}, blobs))
            except BaseException as e:
                status = 1
                try:
                    _write_all(w, encode_frame({"error": f"{type(e).__name__}: {e}"}, []))
                except BaseException:
                    pass
            finally:
                os._exit(status)
        os.close(w)
        try:
            header, blobs = _read_frame(r)
        finally:
            os.close(r)
            os.waitpid(pid, 0)
        if "error" in header:
            raise OSError(header["error"])
        return header["value"], blobs

    def write_files_as_user(self, files: list[dict[str, Any]], blobs: list[bytes]) -> None:
        def work() -> tuple[int, list[bytes]]:
            for f in files:
                path = os.path.join(BOX, f["path"])
                os.makedirs(os.path.dirname(path), exist_ok=True)
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, f.get("mode", 0o644))
                try:
                    _write_all(fd, blobs[f["blob"]])
                finally:
                    os.close(fd)
            return len(files), []

        if files:
            self.as_user(work)

    def become_run_user(self) -> None:
        """Drop to the run's identity: the slot's uid (root mode), or RUN_UID in a nested user
        namespace with every capability dropped (rootless mode)."""
        if not self.rootless:
            os.setgroups([])
            os.setresgid(self.uid, self.uid, self.uid)
            os.setresuid(self.uid, self.uid, self.uid)
            return
        self.sys.unshare(CLONE_NEWUSER)
        for name, value in (("setgroups", "deny"), ("uid_map", f"{RUN_UID} 0 1"), ("gid_map", f"{RUN_UID} 0 1")):
            fd = os.open(f"/proc/self/{name}", os.O_WRONLY)
            try:
                os.write(fd, value.encode())
            finally:
                os.close(fd)
        # A new user namespace grants every capability inside it; a run needs none.
        for cap in range(64):
            if self.sys.libc.prctl(PR_CAPBSET_DROP, self.sys.ctypes.c_ulong(cap), 0, 0, 0) != 0:
                break  # EINVAL past the last capability this kernel knows
        header = (self.sys.ctypes.c_uint32 * 2)(_LINUX_CAPABILITY_VERSION_3, 0)
        data = (self.sys.ctypes.c_uint32 * 6)()
        self.sys.check(self.sys.libc.capset(header, data), "capset")

    def child(self, step: RunStep, lim: RunLimits, req: dict[str, Any],
              in_r: int, out_w: int, err_w: int, exc_w: int, keep: tuple[int, ...] = ()) -> None:  # fmt: skip
        """Set up a run's process: fds 0-2 the pipes, 3 the set-up error pipe (close-on-exec), then
        ``keep`` at 4, 5, ...; rlimits, unprivileged uid, no_new_privs; its own IPC namespace only
        where the zygote cannot see what a run leaves there (``watch_ipc``)."""
        flags = self.setup_flags(step, req)
        os.setsid()
        if flags & SETUP_UNSHARE_IPC:
            self.sys.unshare(CLONE_NEWIPC)
        if flags & SETUP_JOIN_NETNS and self.jail.host_netns is not None:
            self.sys.setns(self.jail.host_netns, CLONE_NEWNET)
        sources = [fcntl.fcntl(fd, fcntl.F_DUPFD, 64) for fd in (in_r, out_w, err_w, exc_w, *keep)]
        for target, src in enumerate(sources):
            os.dup2(src, target, inheritable=target != 3)
        os.closerange(len(sources), 1 << 16)
        fd = os.open("/proc/self/oom_score_adj", os.O_WRONLY)
        os.write(fd, b"1000")
        os.close(fd)
        for which, soft, hard in self.run_rlimits(step, lim):
            resource.setrlimit(which, (soft, hard))
        self.become_run_user()
        if flags & SETUP_PROTECT:  # a trusted harness: safe from the processes it forks (see runtime)
            self.sys.prctl(PR_SET_DUMPABLE, 0)
            signal.pthread_sigmask(signal.SIG_BLOCK, self.blockable_signals)
        if flags & SETUP_RUN_FILTER and self.run_filter is not None:  # last: the set-up above uses calls it refuses
            self.sys.install_filter(self.run_filter)
        os.chdir(BOX)
        os.umask(0o022)
        set_signal(SIGINT, _signal.default_int_handler)  # Python's own (the zygote's is SIG_DFL)
        if step.get("role") == "session":
            return  # the caller runs the session worker loop in this process
        if step.get("argv"):
            self.exec_program(step["argv"], req.get("env") or {})
        self.run_python_inline(step["inline_python"], list(step.get("args") or []), self.cached_code,
                               self.streams)  # fmt: skip

    def setup_flags(self, step: RunStep, req: dict[str, Any]) -> int:
        """What a run's set-up does beyond its fixed steps, as ``SETUP_*`` bits: decided once, here,
        for both set-ups (``child`` in Python, forker.c in C)."""
        flags = 0 if self.jail.ipc_fds else SETUP_UNSHARE_IPC
        flags |= SETUP_JOIN_NETNS if req.get("network") and self.jail.host_netns is not None else 0
        flags |= SETUP_ROOTLESS if self.rootless else 0
        flags |= SETUP_PROTECT if step.get("protect") else 0
        return flags | (SETUP_RUN_FILTER if self.run_filter is not None else 0)

    def run_rlimits(self, step: RunStep, lim: RunLimits | None = None) -> list[tuple[int, int, int]]:
        """A run's rlimits as (resource, soft, hard), in the order they are set."""
        lim = lim if lim is not None else step["limits"]
        limits = []
        if step.get("role") != "session":  # a session's worker lives on: the zygote meters each exec
            cpu = max(1, int(-(-lim["cpu_s"] // 1)))
            limits.append((resource.RLIMIT_CPU, cpu, cpu + 1))
        limits += [
            (resource.RLIMIT_FSIZE, lim["file_size_bytes"], lim["file_size_bytes"]),
            (resource.RLIMIT_NOFILE, lim["open_files"], lim["open_files"]),
            (resource.RLIMIT_NPROC, lim["processes"], lim["processes"]),
            (resource.RLIMIT_CORE, 0, 0),
        ]
        stack = lim.get("stack_bytes")
        if stack:
            limits.append((resource.RLIMIT_STACK, stack, stack))
        if not self.cgroup.has("memory"):  # no memory cgroup (rootless): limit the address space instead
            extra = lim.get("address_space_extra", 0) + (0 if step.get("argv") else self.vm_size)
            limit_as = lim["memory_bytes"] + extra
            limits.append((resource.RLIMIT_AS, limit_as, limit_as))
        return limits

    @staticmethod
    def main_file(step: RunStep, header: dict[str, Any]) -> dict[str, Any] | None:
        """The request's entry for the step's main file (``inline_python``), if it sent one."""
        name = step.get("inline_python")
        return next((f for f in header.get("files", []) if f["path"] == name), None) if name else None

    def sent_source(self, step: RunStep, header: dict[str, Any], blobs: list[Any]) -> memoryview | None:
        """A plain Python step's main file as this request sent it (a view of the request's blobs,
        which ``scrub`` zeroes: no copy of it stays here), for the forker to pass to the run, which
        then neither opens nor reads the file (~30 page faults a run); None for a harness, a session,
        a file not sent or one too large for the forker's message."""
        if self.cached_code is not None or header.get("keep_files") or self.forker is None:
            return None
        entry = self.main_file(step, header)
        if entry is None or len(blobs[entry["blob"]]) > Forker.SOURCE_CAPACITY:
            return None
        return memoryview(blobs[entry["blob"]])

    def cache_main(self, step: RunStep, header: dict[str, Any], blobs: list[bytes]) -> None:
        """Compile a trusted main file once per slot (the grader's harness, identical every run)
        so each run's child inherits the code object instead of compiling ~9 KB again."""
        self.cached_code = self.cached_key = None
        name = step.get("inline_python")
        if not (step.get("cache_code") and name) or header.get("keep_files"):
            return
        entry = self.main_file(step, header)
        if entry is None:
            return
        source = bytes(blobs[entry["blob"]])
        import hashlib

        key = hashlib.sha256(source).hexdigest() + (":preload" if step.get("preload") else "")
        code = self.code_cache.get(key)
        if code is None:
            code = compile(source, os.path.join(BOX, name), "exec", dont_inherit=True)
            if step.get("preload"):
                code = self.preload_module(code)
            if len(self.code_cache) >= 16:
                self.code_cache.pop(next(iter(self.code_cache)))
            self.code_cache[key] = code
        self.cached_code, self.cached_key = code, key

    @staticmethod
    def preload_module(code: Any) -> dict[str, Any]:
        """Run a trusted module's top level here, once per slot: every run's child inherits the
        functions it defines, and calls its ``main()``. A harness defines a few dozen functions and
        classes; making them in each child cost ~120 page faults per process. Only for code whose
        top level only defines (the grading harness, ``AsyncSandbox.run(harness=True)``)."""
        import gc

        namespace: dict[str, Any] = {"__name__": "dojo_preloaded", "__builtins__": builtins}
        exec(code, namespace)
        if not callable(namespace.get("main")):
            raise ValueError("a preloaded main file must define main()")
        gc.collect()
        gc.freeze()  # like the zygote's own objects: never scanned (so never copied) by a child
        return namespace

    @staticmethod
    def reseed(random_module: Any) -> None:
        """``random.seed()`` for a fresh run: the C seeding of the module's generator from the OS,
        without random.py's Python wrapper around it (~20 page faults in a fresh process)."""
        import _random

        generator = random_module._inst
        _random.Random.seed(generator, None)
        generator.gauss_next = None

    @staticmethod
    def prepare_python_process(streams: tuple[Any, Any, Any] | None) -> Any:
        """What a Python run's process holds before its own code, whatever the run: ``streams`` (the
        zygote's prebuilt, never-used stdin/stdout/stderr over fds 0-2) as its stdio, /box first on
        its path, a fresh ``__main__`` module (returned), ``sys.argv`` as for ``main.py`` without
        arguments. The forker does this once, before its loop, so that its runs inherit it done (~20
        page faults a run when each did it)."""
        sys.stdin, sys.stdout, sys.stderr = streams or Zygote.build_streams()
        sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, sys.stdout, sys.stderr  # type: ignore[misc]
        sys.argv = [MAIN_FILE]
        sys.path.insert(0, BOX)
        main = types.ModuleType("__main__")
        main.__builtins__ = builtins  # type: ignore[attr-defined]
        sys.modules["__main__"] = main
        return main

    @staticmethod
    def run_python_inline(filename: str, args: list[str], cached: Any = None,
                          streams: tuple[Any, Any, Any] | None = None, source: Any = None,
                          forked: bool = False, reseeded: bool = False) -> None:  # fmt: skip
        """The fast path: run Python source in this already-warm interpreter, as `python main.py` would.
        The environment is already the run's (``Zygote.use_environment``); the process is prepared
        with ``streams`` (``prepare_python_process``), unless the forker did it (``forked``);
        ``source``, where given, is the main file's content as the zygote wrote it (so it is not read
        back); ``reseeded``: the forker has already reseeded ``random`` (``Forker.random_state``)."""
        exc_fd = 3
        os.close(exc_fd)  # set-up succeeded: nothing to report
        main = sys.modules["__main__"] if forked else Zygote.prepare_python_process(streams)
        path = f"{BOX}/{filename}"
        main.__file__ = path
        if args or filename != MAIN_FILE:  # (``prepare_python_process`` set it for main.py)
            sys.argv = [filename, *args]
        if not reseeded and "random" in sys.modules:
            Zygote.reseed(sys.modules["random"])
        status = 0
        try:
            if isinstance(cached, dict):  # a preloaded module (Zygote.preload_module)
                cached["main"]()
            else:
                if cached is not None:
                    code = cached
                else:
                    if source is None:
                        with open(path, "rb") as f:
                            source = f.read()
                    code = compile(source, path, "exec", dont_inherit=True)
                exec(code, main.__dict__)
        except SystemExit as e:
            status = _exit_status(e)
        except BaseException as e:
            import traceback

            tb = e.__traceback__.tb_next if e.__traceback__ else None  # start at the program's frame
            traceback.print_exception(type(e), e, tb)
            status = 1
        try:
            threading = sys.modules.get("threading")
            # Wait for the run's non-daemon threads as Python's exit does, where there may be one: a
            # shutdown lock besides the main thread's own, or a thread pool's exit hook (always
            # calling ``_shutdown`` cost every run ~45 page faults).
            if threading is not None:
                locks = threading._shutdown_locks
                if threading._threading_atexits or len(locks) > (threading._main_thread._tstate_lock in locks):
                    threading._shutdown()
            atexit = sys.modules.get("atexit") or __import__("atexit")
            atexit._run_exitfuncs()
        except SystemExit as e:
            status = _exit_status(e)
        except BaseException:
            pass
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:
                status = status or 120
        os._exit(status)

    # -- main loop -----------------------------------------------------------------------------

    def serve(self, rfd: int, wfd: int) -> None:
        self.fork_spare((rfd, wfd))
        while True:
            try:
                header, blobs = self.read_request(rfd)
            except EOFError:
                return
            try:
                resp, out_blobs = self.handle(header, blobs)
            except Exception as e:
                self.reap_all()
                resp, out_blobs = {"error": f"{type(e).__name__}: {e}"}, []
            finally:
                del blobs
                self.scrub()
            resp["id"] = header.get("id")
            _write_all(wfd, encode_frame(resp, out_blobs))
            if header.get("last"):
                return
            self.fork_spare((rfd, wfd))


class Sessions:
    """The session worker: a session's persistent Python interpreter (variables live in it
    between execs), forked on first use; each exec is one frame to it, metered by the zygote."""

    def __init__(self, zygote: Zygote) -> None:
        self.zygote = zygote
        self.worker: SessionWorker | None = None

    def start(self, lim: RunLimits, req: dict[str, Any]) -> None:
        """Fork the persistent Python worker of a session (variables live in it between execs)."""
        ctl_r, ctl_w = os.pipe2(os.O_CLOEXEC)
        st_r, st_w = os.pipe2(os.O_CLOEXEC)
        out_r, out_w = os.pipe2(os.O_CLOEXEC)
        err_r, err_w = os.pipe2(os.O_CLOEXEC)
        exc_r, exc_w = os.pipe2(os.O_CLOEXEC)
        null = os.open("/dev/null", os.O_RDONLY | os.O_CLOEXEC)
        pid = os.fork()
        if pid == 0:  # pragma: no cover
            try:
                self.zygote.child({"role": "session"}, lim, req, null, out_w, err_w, exc_w, keep=(ctl_r, st_w))
                os.chdir(BOX)
                os.close(3)
                self.session_worker_loop(4, 5, dict(req.get("env") or {}))
            except BaseException as e:
                try:
                    import traceback

                    os.write(2, f"dojo session worker failed: {type(e).__name__}: {e}\n".encode()[:4000])
                    os.write(2, traceback.format_exc().encode()[-4000:])
                finally:
                    os._exit(127)
            os._exit(0)
        for fd in (ctl_r, st_w, out_w, err_w, exc_w, null):
            os.close(fd)
        for fd in (st_r, out_r, err_r, exc_r):
            os.set_blocking(fd, False)
        self.worker = SessionWorker(
            pid=pid, pidfd=os.pidfd_open(pid), ctl=ctl_w, status=st_r, out=out_r, err=err_r, exc=exc_r, limits=lim
        )

    def stop(self) -> None:
        w = self.worker
        if w is None:
            return
        self.worker = None
        for fd in (w["ctl"], w["status"], w["out"], w["err"], w["exc"], w["pidfd"]):
            try:
                os.close(fd)
            except OSError:
                pass
        self.zygote.reap_all()

    @staticmethod
    def _proc_cpu(pid: int) -> float:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            ticks = sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
            return ticks / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            return 0.0

    def run(self, step: RunStep, stdin: bytes, req: dict[str, Any]) -> tuple[RunReply, bytes, bytes]:
        """One exec in the session's persistent interpreter (started on first use)."""
        lim: RunLimits = step["limits"]
        restarted = False
        if self.worker is None:
            self.zygote.cgroup.set_limits(lim)
            self.start(lim, req)
            restarted = True
        w = self.worker
        if w is None:
            raise RuntimeError("session worker did not start")
        mem_base = self.zygote.cgroup.reset_peak()
        oom_before = self.zygote.oom_count
        cpu_before = self._proc_cpu(w["pid"])
        start = time.monotonic()
        deadline = start + lim["wall_s"]
        capture = Capture(lim["output_bytes"])
        limit: str | None = None
        try:
            _write_all(w["ctl"], encode_frame({"exec": True}, [step["code"].encode(), stdin]))
        except OSError:
            pass
        poller = select.poll()
        for fd in (w["status"], w["out"], w["err"], w["pidfd"]):
            poller.register(fd, select.POLLIN)
        done: dict[str, Any] | None = None
        died = False
        status_buf = bytearray()
        while done is None and not died:
            now = time.monotonic()
            if now >= deadline:
                limit = "wall"
                break
            if self._proc_cpu(w["pid"]) - cpu_before > lim["cpu_s"]:
                limit = "cpu"
                break
            for fd, _event in poller.poll(min(deadline - now, 0.05) * 1000):
                if fd == w["out"]:
                    capture.drain(fd, "stdout")
                elif fd == w["err"]:
                    capture.drain(fd, "stderr")
                elif fd == w["status"]:
                    try:
                        status_buf += os.read(fd, 65536)
                    except BlockingIOError:
                        pass
                    if len(status_buf) >= FRAME_PREFIX.size:
                        hlen, _ = FRAME_PREFIX.unpack(status_buf[: FRAME_PREFIX.size])
                        if len(status_buf) >= FRAME_PREFIX.size + hlen:
                            done = json.loads(status_buf[FRAME_PREFIX.size : FRAME_PREFIX.size + hlen])
                elif fd == w["pidfd"]:
                    died = True
            if capture.over_cap and limit is None:
                limit = "output"
                break
        capture.drain(w["out"], "stdout")
        capture.drain(w["err"], "stderr")
        wall = time.monotonic() - start
        cpu = max(0.0, self._proc_cpu(w["pid"]) - cpu_before)
        exit_code: int | None = None
        sig: int | None = None
        exec_error = None
        try:
            exec_error = os.read(w["exc"], 4096).decode(errors="replace") or None
        except BlockingIOError:
            pass
        address_space = not self.zygote.cgroup.has("memory")
        if limit is None and address_space and done and done.get("status") and _out_of_memory(capture.err):
            limit = "memory"  # address-space limit: the MemoryError ends the interpreter as an OOM kill would
        ended = died or limit is not None or bool(done and done.get("ended"))
        max_rss = 0
        if ended:
            pid = w["pid"]
            if limit is not None:
                self.zygote.kill_all()
            try:
                _, status, ru = os.wait4(pid, 0)
                max_rss = ru.ru_maxrss * 1024
                code = os.waitstatus_to_exitcode(status)
                exit_code, sig = (code, None) if code >= 0 else (None, -code)
            except ChildProcessError:
                pass
            self.stop()
            if done and done.get("ended"):
                exit_code = done.get("status", exit_code)
        else:
            exit_code = int(done["status"]) if done else None
        self.zygote.oom_count = self.zygote.cgroup.oom_kills()
        oom = self.zygote.oom_count > oom_before
        failed = sig is not None or bool(exit_code)
        limit = classify_limit(limit, lim, memory_cgroup=self.zygote.cgroup.has("memory"), sig=sig, cpu=cpu, oom=oom,
                               failed=failed, err=capture.err, max_rss=max_rss)  # fmt: skip
        res: RunReply = {
            "role": "run", "exit_code": exit_code, "signal": sig, "wall_s": wall, "cpu_s": cpu,
            "peak_memory_bytes": self.zygote.cgroup.read_peak(mem_base), "limit": limit, "oom_killed": oom,
            "stdout_truncated": capture.truncated["stdout"], "stderr_truncated": capture.truncated["stderr"],
            "exec_error": exec_error, "session_restarted": restarted, "session_ended": ended,
        }  # fmt: skip
        return res, bytes(capture.out), bytes(capture.err)

    @staticmethod
    def session_worker_loop(ctl: int, status_fd: int, env: dict[str, str]) -> None:  # pragma: no cover
        """Inside the worker: run each received chunk in one persistent namespace, like a notebook."""
        import ast
        import io

        sys.stdout = io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, "w", closefd=False)),
                                      encoding="utf-8", errors="surrogateescape", write_through=True)  # fmt: skip
        sys.stderr = io.TextIOWrapper(io.BufferedWriter(io.FileIO(2, "w", closefd=False)),
                                      encoding="utf-8", errors="backslashreplace", write_through=True)  # fmt: skip
        os.environ.clear()
        os.environ.update(env)
        sys.argv = [""]
        sys.path.insert(0, BOX)
        if "random" in sys.modules:
            sys.modules["random"].seed()
        main = types.ModuleType("__main__")
        main.__builtins__ = builtins  # type: ignore[attr-defined]
        sys.modules["__main__"] = main
        n = 0
        while True:
            try:
                _, blobs = _read_frame(ctl)
            except EOFError:
                os._exit(0)
            n += 1
            code, stdin = blobs[0].decode("utf-8", errors="replace"), blobs[1]
            sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8", errors="surrogateescape")
            status = 0
            ended = False
            try:
                tree = ast.parse(code, f"<exec {n}>", "exec")
                last = tree.body[-1] if tree.body and isinstance(tree.body[-1], ast.Expr) else None
                if last is not None:
                    tree.body.pop()
                exec(compile(tree, f"<exec {n}>", "exec"), main.__dict__)
                if last is not None:
                    value = eval(compile(ast.Expression(last.value), f"<exec {n}>", "eval"), main.__dict__)
                    if value is not None:
                        print(repr(value))
            except SystemExit as e:
                status = _exit_status(e)
                ended = True
            except BaseException as e:
                import traceback

                tb = e.__traceback__.tb_next if e.__traceback__ else None  # hide this loop's frame
                traceback.print_exception(type(e), e, tb)
                status = 1
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except BaseException:
                    pass
            _write_all(status_fd, encode_frame({"status": status, "ended": ended}, []))
            if ended:
                os._exit(status)

    # -- the child -----------------------------------------------------------------------------


OUT_OF_MEMORY_MARKS = (b"MemoryError", b"std::bad_alloc", b"Cannot allocate memory", b"out of memory",
                       b"JavaScript heap out of memory", b"Failed to reserve virtual memory")  # fmt: skip


def set_signal(signum: int, handler: Any) -> None:
    """``signal.signal`` without turning the old handler into an enum member on the way out: that is
    Python code (enum's lookup) whose first use in a fresh run's process cost ~120 page faults
    (~0.5 ms, a quarter of a ``print(1)`` run)."""
    _signal.signal(int(signum), handler if callable(handler) else int(handler))  # (SIG_DFL: a plain int here)


def _out_of_memory(stderr: bytearray) -> bool:
    """Where memory is an address-space rlimit, a failed allocation shows only in the program's own
    report: a Python MemoryError, a C++ bad_alloc, V8's fatal OOM, a C library's ENOMEM message."""
    tail = bytes(stderr[-4096:])
    return any(mark in tail for mark in OUT_OF_MEMORY_MARKS)


def _exit_status(e: SystemExit) -> int:
    code = e.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    try:
        print(code, file=sys.stderr)
    except BaseException:
        pass
    return 1


def main() -> None:
    config = json.loads(sys.argv[1])
    # Keep the protocol on private fds; 0/1/2 become /dev/null so nothing leaks into them.
    rfd = os.dup(0)
    wfd = os.dup(1)
    null = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
    zygote = Zygote(config)
    try:
        zygote.setup()
    except BaseException as e:
        import traceback

        where = traceback.extract_tb(e.__traceback__)[-1]
        error = f"{type(e).__name__}: {e} (zygote.py:{where.lineno} {where.line})"
        _write_all(wfd, encode_frame({"ready": False, "error": error}, []))
        os._exit(1)
    _write_all(wfd, encode_frame({"ready": True, "forker_error": zygote.forker_error}, []))
    zygote.serve(rfd, wfd)
    os._exit(0)


if __name__ == "__main__":
    main()
