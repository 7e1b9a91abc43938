"""``Forker``: the zygote's end of its forker (``forker.c``, built on the host by
``dojo.sandbox.forker_build``): a fork of the warm zygote that forks each one-shot run and sets it
up in C; the run then continues in Python (``RunChild.become_forked_run``).

Runs inside the sandbox, in the zygote (and, forked, in the forker): standard library only.
"""

from __future__ import annotations

import array
import os
import select
import signal
import socket
import struct
import sys
from typing import TYPE_CHECKING, Any

from dojo.sandbox.guest.child import RUN_UID, SETUP_CANDIDATE, SETUP_JOIN_NETNS, SETUP_PROTECT, SETUP_SPLIT
from dojo.sandbox.guest.jail import BOX
from dojo.sandbox.guest.syscalls import Syscalls
from dojo.sandbox.guest.wire import RunStep

if TYPE_CHECKING:
    from dojo.sandbox.guest.child import RunChild


class Resident:
    """A process of the zygote's that outlives runs, spoken to on a socket (``sock``): the forker,
    the judge (``guest.judge``). Its pid is None when there is none."""

    pid: int | None
    sock: Any

    def alive(self) -> bool:
        """Whether it runs; reaps it if it died."""
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
        """Kill and reap it."""
        if self.pid is not None:
            try:
                os.kill(self.pid, 9)
                os.waitpid(self.pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
        self.forget()


class Forker(Resident):
    """The zygote's end of its forker (``forker.c``, built on the host): a fork of the warm zygote
    that forks each one-shot run and sets it up in C, running no Python between runs, so neither it
    nor the zygote pays copy-on-write faults for the other's pages (the zygote, which forks nothing
    else, stops write-protecting its own). A run it forks is the zygote's child (CLONE_PARENT), set
    up as ``RunChild.child`` would, and continues in Python in ``RunChild.become_forked_run``.

    It is a snapshot of the zygote: it is forked again when what a run inherits from the zygote has
    changed since (a newly compiled main file, a new IPC namespace), and when it is gone (in
    rootless mode a run, being the same user, can kill or stop it: it is continued before each
    request and replaced if dead; it holds nothing a run could use)."""

    SETUP = struct.Struct("=IIiIIIQ" + "iiQQ" * 8 + "64s")  # forker.c's struct run_setup
    SETUP_VERSION = 1
    MAX_RLIMITS = 8
    PAYLOAD_CAPACITY = 1 << 16  # a run's message; a larger one (huge argv or env) is forked directly
    SOURCE_CAPACITY = 1 << 15  # a main file up to this size travels in the message (else the run reads it)
    ROLE_SHIFT = 24  # forker.c returns a run's message length, and its role from this bit up
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

    def spawn(self, zygote: RunChild) -> None:
        """Fork the forker from the zygote as it is now (replacing any earlier one)."""
        self.stop()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        theirs_fd = theirs.detach()
        self.random_state = self.random_state_address()
        pid = zygote.sys.fork()
        if pid == 0:  # pragma: no cover - the forker, then (returning from C) each run's process
            try:
                zygote.forget_request()  # (forked mid-request: nothing of it may outlive it here)
                ours.detach()  # the zygote's end: closed below with the rest
                keep = sorted({0, 1, 2, theirs_fd, *((zygote.jail.host_netns,) if zygote.jail.host_netns else ())})
                low = 0
                for fd in keep:
                    if low < fd:  # (closerange(0, 0) closes every fd: close_range(0, UINT_MAX))
                        os.closerange(low, fd)
                    low = fd + 1
                os.closerange(low, 1 << 16)
                zygote.prepare_python_process(zygote.streams)  # for every run it forks, once
                served = self.serve_forks(theirs_fd, self.payload_view, self.PAYLOAD_CAPACITY, self.random_state)
                if served < 0:
                    os._exit(0)  # the zygote closed its end (or the forker could not start)
                role, length = served >> self.ROLE_SHIFT, served & ((1 << self.ROLE_SHIFT) - 1)
                candidate = int.from_bytes(self.payload[length : length + 4], sys.byteorder) if role else 0
                zygote.become_forked_run(memoryview(self.payload)[:length], role, candidate)
            finally:
                os._exit(127)
        os.close(theirs_fd)
        self.pid, self.sock = pid, ours
        self.snapshot = (frozenset(zygote.code_cache), zygote.jail.ipc_generation)
        self.environment = dict(os.environ)

    def setup(self, zygote: RunChild, step: RunStep, req: dict[str, Any], candidate: bool = False) -> bytes:
        """The run's ``struct run_setup``: what ``RunChild.child`` does, as data. ``candidate``: a
        judged harness's candidate process (forker.c's ``become_candidate``), not protected."""
        flags = zygote.setup_flags(step, req)
        if candidate:
            flags = (flags & ~SETUP_PROTECT) | SETUP_CANDIDATE
        elif self.splits(zygote, step):
            flags |= SETUP_SPLIT
        limits = zygote.run_rlimits(step)
        rows: list[int] = []
        for resource_, soft, hard in limits:
            rows += [resource_, 0, soft, hard]
        rows += [0, 0, 0, 0] * (self.MAX_RLIMITS - len(limits))
        address = self.ctypes.addressof(zygote.run_filter[0]) if zygote.run_filter is not None else 0
        uid = RUN_UID if zygote.rootless else zygote.uid
        netns = zygote.jail.host_netns if flags & SETUP_JOIN_NETNS and zygote.jail.host_netns is not None else -1
        return self.SETUP.pack(self.SETUP_VERSION, flags, netns, uid, len(limits), 0o022, address, *rows, BOX.encode())

    @staticmethod
    def splits(zygote: RunChild, step: RunStep) -> bool:
        """Whether the run is a grading harness whose candidate's process the set-up forks too
        (forker.c's ``split_harness``): a protected run of a preloaded main file that defines
        ``candidate_main`` (``dojo.rewards.programs.harness``)."""
        cached = zygote.cached_code
        return bool(step.get("protect")) and isinstance(cached, dict) and callable(cached.get("candidate_main"))

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
