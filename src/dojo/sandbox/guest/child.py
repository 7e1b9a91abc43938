"""A run's process: its set-up and its program, the one-shot run path's in-process end.

``RunChild`` holds what the zygote does *in* a run's process, which it forks (``guest.processes``),
or the forker forks (``guest.forker``), or a spare waits in:

- the set-up (``child``): fds 0-3, rlimits, the run's uid (or a nested user namespace), its IPC
  and network namespaces, no_new_privs, a trusted harness's protection, the run's syscall filter;
  ``setup_flags`` and ``run_rlimits`` decide it once for both set-ups (``child`` in Python,
  forker.c in C);
- the program: ``exec_program`` (execve), or ``run_python_inline``, the fast path (the run's
  Python source in the warm interpreter it was forked with, its stdio prebuilt by
  ``prebuild_streams``, its main file compiled once per slot by ``cache_main`` or sent along,
  ``sent_source``).

Runs inside the sandbox, in the zygote and each run's process: standard library only.
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # (signal.signal without its enum wrapping)
import builtins
import fcntl
import marshal
import os
import resource
import signal
import sys
import types
from typing import TYPE_CHECKING, Any

from dojo.sandbox.guest.cgroup import CgroupHandle
from dojo.sandbox.guest.ending import (
    end_by_interrupt,
    ends_by_interrupt,
    exit_status,
    files_left_open,
    finalize_main,
    flush_open_files,
    flush_streams,
    note_standard_streams,
    print_program_error,
)
from dojo.sandbox.guest.jail import BOX, Jail
from dojo.sandbox.guest.syscalls import (
    CLONE_NEWIPC,
    CLONE_NEWNET,
    CLONE_NEWUSER,
    LINUX_CAPABILITY_VERSION_3,
    PR_CAPBSET_DROP,
    PR_SET_DUMPABLE,
    Syscalls,
)
from dojo.sandbox.guest.wire import Blob, RunLimits, RunStep, wipe

if TYPE_CHECKING:
    from dojo.sandbox.guest.forker import Forker

RUN_UID = 1000  # what a rootless run sees as its uid (and as the owner of /box)
MAIN_FILE = "main.py"  # what the languages call a Python program's file (dojo.sandbox.languages)
SIGINT = int(signal.SIGINT)  # a plain int: on a run's path, the enum member costs page faults to use

# What a run's set-up does beyond the fixed steps (forker.c's flags; ``RunChild.setup_flags``).
SETUP_UNSHARE_IPC = 1  # a fresh IPC namespace (where the zygote cannot watch its own)
SETUP_JOIN_NETNS = 2  # the host's network namespace
SETUP_ROOTLESS = 4  # a nested user namespace instead of a uid change
SETUP_PROTECT = 8  # a trusted harness: not dumpable, every signal blocked
SETUP_RUN_FILTER = 16  # the run's own syscall filter, last
SETUP_SPLIT = 32  # a split grading harness: its candidate's process forked in the set-up too
SETUP_CANDIDATE = 64  # a judged grading harness's candidate process (``guest.judge``)
# A forked run's role (forker.c's ``split_harness``): a plain run, or one of a split harness's two
ROLE_RUN, ROLE_TRUSTED, ROLE_CANDIDATE = 0, 1, 2
TRUSTED_CALL_FD, TRUSTED_REPLY_FD = 4, 5  # the trusted process's ends of a split harness's channel


class RunChild:
    """The zygote's part that runs in a run's process (the ``Zygote`` sets every field)."""

    sys: Syscalls
    jail: Jail
    cgroup: CgroupHandle
    rootless: bool
    uid: int  # the run's uid (0 when rootless: RUN_UID in the run's own user namespace)
    run_filter: Any  # the run's own syscall filter (``Syscalls.syscall_filter``), where the host sent one
    blockable_signals: set[signal.Signals]
    vm_size: int  # the zygote's address space (an inline run's RLIMIT_AS starts from it)
    streams: tuple[Any, Any, Any] | None  # every Python run's stdio, prebuilt (``prebuild_streams``)
    original_stdio: tuple[Any, ...]
    environment: dict[str, str] | None  # the zygote's os.environ, as last set (``use_environment``)
    code_cache: dict[str, Any]  # compiled (or preloaded) trusted main files, by source hash
    cached_code: Any  # this step's, from ``code_cache``
    cached_key: str | None
    forker: Forker | None
    request_body: bytearray | None  # the request's blobs, as read (``Zygote.read_request``)
    main_source: memoryview | None  # the step's main file as sent (``RunChild.sent_source``)
    reply_blobs: list[Blob]  # the reply's blobs made so far (``Zygote.handle_request``)

    # -- what every run inherits from the zygote -------------------------------------------------

    def use_environment(self, env: dict[str, str]) -> None:
        """Make the zygote's environment exactly ``env``, so an in-process Python run inherits it as
        it is. Requests rarely change it; setting it here rather than in each child saves every run
        ~50 page faults of putenv() and dict work."""
        if env != self.environment:
            os.environ.clear()
            os.environ.update(env)
            self.environment = dict(env)

    @staticmethod
    def build_streams() -> tuple[Any, Any, Any]:
        """A Python run's stdin, stdout and stderr over fds 0, 1 and 2, as the interpreter makes them
        (``create_stdio``): no newline translation (stdin had read ``"abc\\r\\n"`` as ``"abc"``,
        found 2026-12-06), ``<stdin>`` & co. as names, ``mode`` set."""
        import io

        streams = []
        for fd, name, errors in ((0, "<stdin>", "surrogateescape"), (1, "<stdout>", "surrogateescape"),
                                 (2, "<stderr>", "backslashreplace")):  # fmt: skip
            raw = io.FileIO(fd, "r" if fd == 0 else "w", closefd=False)
            raw.name = name
            buffer = io.BufferedReader(raw) if fd == 0 else io.BufferedWriter(raw)
            stream = io.TextIOWrapper(buffer, encoding="utf-8", errors=errors, newline="\n", line_buffering=fd == 2)
            stream.mode = "r" if fd == 0 else "w"  # type: ignore[misc]
            streams.append(stream)
        return streams[0], streams[1], streams[2]

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

    # -- a run's process: entry points and set-up ------------------------------------------------

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

    def become_forked_run(self, message: memoryview, role: int = ROLE_RUN, candidate: int = 0) -> None:
        """In a run's process the forker made and set up (``Forker``): run it; never returns. A split
        harness (``SETUP_SPLIT``) has two: the trusted one (``role``: ROLE_TRUSTED, ``candidate``
        its candidate's pid) runs the harness's ``main``, the candidate's its ``candidate_main``."""
        try:
            run = marshal.loads(message)  # (see ``fork_or_start``)
            set_signal(SIGINT, _signal.default_int_handler)  # Python's own (the zygote's is SIG_DFL)
            if len(run) == 2:
                self.exec_program(*run)
            filename, args, key, env, n, modules = run
            if env is not None:
                self.use_environment(env)
                use_python_path(env)
            cached = self.code_cache[key] if key is not None else None
            if role == ROLE_CANDIDATE:  # never goes on as a run (fd 3 is its channel now: nothing to report)
                if isinstance(cached, dict):
                    cached["candidate_main"]()  # never returns
                os._exit(125)
            source = message[len(message) - n :] if n is not None else None  # (the payload's last n bytes)
            reseeded = self.forker is not None and self.forker.random_state != 0
            split = (candidate, TRUSTED_CALL_FD, TRUSTED_REPLY_FD) if role == ROLE_TRUSTED else None
            self.run_python_inline(filename, args, cached, source=source, forked=True, reseeded=reseeded, split=split,
                                   modules=modules)  # fmt: skip
        except BaseException as e:
            if role == ROLE_CANDIDATE:
                os._exit(125)
            try:
                os.write(3, f"{type(e).__name__}: {e}".encode()[:4000])
            finally:
                os._exit(127)
        os._exit(127)

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
                               self.streams, modules=step.get("modules"))  # fmt: skip

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
        header = (self.sys.ctypes.c_uint32 * 2)(LINUX_CAPABILITY_VERSION_3, 0)
        data = (self.sys.ctypes.c_uint32 * 6)()
        self.sys.check(self.sys.libc.capset(header, data), "capset")

    # -- the step's main file: compiled once per slot, or sent along ---------------------------------

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
        if entry is None or len(blobs[entry["blob"]]) > self.forker.SOURCE_CAPACITY:
            return None
        return memoryview(blobs[entry["blob"]])

    def forget_request(self) -> None:
        """In a process forked from the zygote while a request is in hand, to outlive it (the forker,
        forked anew for a harness compiled by that request or after an IPC namespace change): the
        request's blobs (its files, source and stdin), and its reply's so far (the output of its
        earlier steps), zeroed in this process's own copy of them.
        Every run the forker makes is a copy of it: it would hold them for every later run of the
        slot (a scicode: candidate ran the next task's reference, found there, and scored 1.0)."""
        body = self.request_body
        self.main_source = None
        if body:
            body[:] = bytes(len(body))
        wipe(self.reply_blobs)  # (an earlier step's output: a compile step's)

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

    # -- the fast path: the run's Python in this interpreter -------------------------------------

    @staticmethod
    def exec_program(argv: list[str], env: dict[str, str]) -> None:
        for sig in (signal.SIGPIPE, signal.SIGXFSZ):  # Python ignores these; programs expect defaults
            set_signal(sig, signal.SIG_DFL)
        os.execve(argv[0], argv, dict(env))

    @staticmethod
    def reseed(random_module: Any) -> None:
        """``random.seed()`` for a fresh run: the C seeding of the module's generator from the OS,
        without random.py's Python wrapper around it (~20 page faults in a fresh process)."""
        import _random

        generator = random_module._inst
        _random.Random.seed(generator, None)
        generator.gauss_next = None

    @staticmethod
    def note_numpy_state() -> None:
        """In the zygote, once it has preloaded: where numpy's global generator (``np.random.rand``,
        ``shuffle``, pandas' ``sample()``) keeps its MT19937 key, for each run to draw its own
        (``reseed_numpy``); none unless numpy is loaded and the memory is laid out as that assumes
        (checked against ``get_state()``, word for word) with no Gaussian cached."""
        numpy_random = sys.modules.get("numpy.random")
        if numpy_random is None:
            return
        try:
            import ctypes
            import struct

            generator = numpy_random.mtrand._rand
            kind, key, pos, has_gauss, _ = generator.get_state()
            address = generator._bit_generator.ctypes.state_address
            words = struct.unpack(f"={MT_WORDS}Ii", ctypes.string_at(address, 4 * MT_WORDS + 4))
            if kind == "MT19937" and not has_gauss and [int(k) for k in key] == list(words[:MT_WORDS]):
                _NUMPY_STATE[:] = [address] if words[MT_WORDS] == pos else []
        except Exception:
            pass  # (another numpy: its generator stays as the zygote left it)

    @staticmethod
    def note_recursion_budget() -> None:
        """In the zygote, once: where CPython 3.11 keeps the thread's recursion budget and limit
        (``PyThreadState.recursion_remaining``, ``recursion_limit``), so that each run's program
        starts with python3's budget: the frames of the run's machinery below the program's had cost
        it 7-11 levels (a recursion 990 deep failed where python3 goes to 998; found 2026-12-07).
        Nothing is noted where the memory is not laid out so: the limit read there must be the
        interpreter's, and the budget one less a call deeper."""
        if sys.version_info[:2] != (3, 11):
            return
        try:
            import ctypes

            state = ctypes.pythonapi.PyThreadState_Get
            state.restype = ctypes.c_void_p
            address = state()
            remaining, limit = ctypes.c_int.from_address(address + 32), ctypes.c_int.from_address(address + 36)

            def deeper() -> int:
                return int(remaining.value)

            if limit.value == sys.getrecursionlimit() and deeper() == remaining.value - 1:
                _RECURSION[:] = [remaining, limit]
        except Exception:
            pass

    @staticmethod
    def reseed_numpy() -> None:
        """numpy's global generator reseeded for a fresh run (``note_numpy_state``): its key drawn
        from the OS into its memory, its position at the end (its next draw makes a fresh block).
        Every run a zygote forked had drawn the same ``np.random.rand()`` (found 2026-12-06);
        ``numpy.random.seed()`` in each run cost ~1 ms and ~150 page faults (found by review).
        ``default_rng()`` draws from the OS already."""
        if _NUMPY_STATE:
            import ctypes

            ctypes.memmove(_NUMPY_STATE[0], os.urandom(4 * MT_WORDS), 4 * MT_WORDS)
            ctypes.c_int.from_address(_NUMPY_STATE[0] + 4 * MT_WORDS).value = MT_WORDS

    @staticmethod
    def prepare_python_process(streams: tuple[Any, Any, Any] | None) -> Any:
        """What a Python run's process holds before its own code, whatever the run: ``streams`` (the
        zygote's prebuilt, never-used stdin/stdout/stderr over fds 0-2) as its stdio, /box first on
        its path and ``PYTHONPATH``'s entries next (``use_python_path``), a fresh ``__main__`` module
        (returned), ``sys.argv`` as for ``main.py`` without arguments. The forker does this once,
        before its loop, so that its runs inherit it done (~20 page faults a run when each did it)."""
        sys.stdin, sys.stdout, sys.stderr = streams or RunChild.build_streams()
        sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, sys.stdout, sys.stderr  # type: ignore[misc]
        note_standard_streams((sys.stdout, sys.stderr))
        sys.argv = [MAIN_FILE]
        sys.path[:] = [BOX, *(p for p in sys.path if p)]  # (the zygote's "" from its -c: none of a script's)
        use_python_path(os.environ)
        main = types.ModuleType("__main__")
        main.__builtins__ = builtins  # type: ignore[attr-defined]
        RunChild.name_main_file(main, f"{BOX}/{MAIN_FILE}")
        main.__annotations__ = {}
        main.__cached__ = None  # type: ignore[attr-defined]
        sys.modules["__main__"] = main
        return main

    @staticmethod
    def name_main_file(main: Any, path: str) -> None:
        """``__file__`` and ``__loader__`` of ``__main__`` as a script's."""
        main.__file__ = path
        main.__loader__ = sys.modules["_frozen_importlib_external"].SourceFileLoader("__main__", path)

    @staticmethod
    def run_python_inline(filename: str, args: list[str], cached: Any = None,
                          streams: tuple[Any, Any, Any] | None = None, source: Any = None,
                          forked: bool = False, reseeded: bool = False, split: tuple[int, int, int] | None = None,
                          modules: list[str] | None = None) -> None:  # fmt: skip
        """The fast path: run Python source in this already-warm interpreter, as `python main.py` would.
        The environment is already the run's (``use_environment``); the process is prepared
        with ``streams`` (``prepare_python_process``), unless the forker did it (``forked``);
        ``source``, where given, is the main file's content as the zygote wrote it (so it is not read
        back); ``reseeded``: the forker has already reseeded ``random`` (``Forker.random_state``);
        ``split``: a split harness's trusted process, what its ``main`` is given (``become_forked_run``);
        ``modules``: the modules the run's files provide (``forget_modules``)."""
        exc_fd = 3
        os.close(exc_fd)  # set-up succeeded: nothing to report
        main = sys.modules["__main__"] if forked else RunChild.prepare_python_process(streams)
        path = f"{BOX}/{filename}"
        if filename != MAIN_FILE:  # (``prepare_python_process`` named main.py)
            RunChild.name_main_file(main, path)
        if args or filename != MAIN_FILE:
            sys.argv = [filename, *args]
        if modules and not isinstance(cached, dict):  # (a preloaded harness imports nothing of the run's)
            forget_modules(modules)
        if not reseeded and "random" in sys.modules:
            RunChild.reseed(sys.modules["random"])
        if _NUMPY_STATE:
            RunChild.reseed_numpy()
        status = 0
        uncaught: BaseException | None = None
        hook_exit: SystemExit | None = None
        try:
            if isinstance(cached, dict):  # a preloaded module (``preload_module``)
                cached["main"](split) if split is not None else cached["main"]()
            else:
                if cached is not None:
                    code = cached
                else:
                    if source is None:
                        with open(path, "rb") as f:
                            source = f.read()
                    code = compile(source, path, "exec", dont_inherit=True)
                if _RECURSION:  # (the program's frame the first to count, as in python3)
                    _RECURSION[0].value = _RECURSION[1].value + 1
                exec(code, main.__dict__)
        except SystemExit as e:
            status = exit_status(e)
        except BaseException as e:
            uncaught = e
        if split is None:  # (Python's ``flush_io`` after a script's code: its output before what its
            flush_streams(standard=False)  # threads and exit handlers print, and a traceback; found 2026-12-06)
        if uncaught is not None:  # (printed outside the handler, as Python's exit path prints it: an
            hook_exit = print_program_error(uncaught)  # error of the program's hook chains to nothing)
            status = 1 if hook_exit is None else exit_status(hook_exit)
        try:
            threading = sys.modules.get("threading")
            # Wait for the run's non-daemon threads as Python's exit does, where there may be one: a
            # shutdown lock besides the main thread's own, or a thread pool's exit hook (always
            # calling ``_shutdown`` cost every run ~45 page faults).
            if threading is not None:
                locks = threading._shutdown_locks
                if threading._threading_atexits or len(locks) > (threading._main_thread._tstate_lock in locks):
                    threading._shutdown()
        except SystemExit as e:
            status = exit_status(e)
        except BaseException:
            pass  # (a ``threading`` of the program's own, without them: its exit handlers still run, as in python3)
        try:
            atexit = sys.modules.get("atexit") or __import__("atexit")
            atexit._run_exitfuncs()
        except SystemExit as e:
            status = exit_status(e)
        except BaseException:
            pass
        if not flush_streams(report=True):
            status = status or 120
        interrupted = hook_exit is None and ends_by_interrupt(uncaught)
        # Where the program left a file open (a harness's trusted process opens none of its own):
        # its objects finalised as Python's exit does, then what is still open flushed. Not on
        # every run: finalising cost a print(1) run ~42 page faults (+18%), and looking through
        # its globals for a writer over a standard descriptor (``open(1, "w")``) ~5 (+2%).
        if split is None and files_left_open():
            if isinstance(cached, dict):  # (a preloaded harness has no script's globals)
                flush_open_files()
            else:
                uncaught = hook_exit = main = None  # (nothing of the program's held here)
                finalize_main()
                if not flush_streams():
                    status = status or 120
                if files_left_open():  # (what finalising left open)
                    flush_open_files()
        if interrupted:
            status = end_by_interrupt()
        os._exit(status)


# -- what both a run and a session's worker use ------------------------------------------------
_PATH_ENTRIES: list[str] = []  # what ``use_python_path`` put on this process's sys.path
# What Python's ``site`` imports before a script starts (a zygote starts without it, ``-S``), and
# ``__future__``: a trusted program (``/run_jupyter``'s driver) imports it before its bundle keeps the
# run's folders off its path, so a run's own ``__future__.py`` must never stand in for it (a file of
# the request's ran in the driver and could sign its record; found by review, 2026-12-07).
KEPT_MODULES = ("site", "sitecustomize", "_sitebuiltins", "os", "os.path", "posixpath", "genericpath", "stat",
                "_stat", "_collections_abc", "__future__")  # fmt: skip
_STARTUP: set[str] = set()  # what ``python3 main.py`` has imported when its script starts (``note_startup_modules``)
_NUMPY_STATE: list[int] = []  # where numpy's global generator keeps its key, where known (``note_numpy_state``)
_RECURSION: list[Any] = []  # this thread's recursion budget and limit, where found (``note_recursion_budget``)
MT_WORDS = 624  # a Mersenne Twister's key, 32-bit words


def use_python_path(env: Any) -> None:
    """A run's ``sys.path`` with the entries of ``env``'s ``PYTHONPATH`` right after the script's
    directory, as python3 puts them (each made absolute from /box, where a run starts; an empty one
    /box itself), in place of those this process (its forker, where the
    run's environment is not the forker's) put there. Entries the slot's path holds already (an
    environment's own site) stay where they are. Only in a run's process or the forker, never the
    zygote: an entry a run can write must never be where the zygote imports from. Until 2026-12-06 a
    fast run ignored a ``PYTHONPATH`` its program set (``import mod`` from ``/box/lib``:
    ``ModuleNotFoundError``)."""
    value = (env or {}).get("PYTHONPATH") or ""
    entries = [os.path.normpath(os.path.join(BOX, p)) for p in value.split(os.pathsep)] if value else []
    for p in _PATH_ENTRIES:
        if p in sys.path[1:]:
            del sys.path[sys.path.index(p, 1)]
    _PATH_ENTRIES[:] = [p for p in dict.fromkeys(entries) if p not in sys.path]
    sys.path[1:1] = _PATH_ENTRIES


def note_startup_modules(names: Any) -> None:
    """The modules a bare interpreter holds at its start (``names``, the zygote's bootstrap took them
    before its first import), with ``site``'s: what ``python3 main.py`` has imported before the
    script, which a file of the script's folder cannot stand in for."""
    _STARTUP.update(names, KEPT_MODULES)


def forget_modules(names: list[str]) -> None:
    """Out of ``sys.modules``, with their submodules, the modules of ``names`` (the modules a run's
    files provide, ``languages.provided_modules``) that this process imported ahead of the run (its
    zygote's preload, an environment's packages) and python3 would not have by the script's start:
    ``import random`` next to a ``random.py`` of the program's finds the program's, as under python3.
    Until 2026-12-07 a fast run's ``import random``, ``import string``, ``import tokenize`` gave the
    standard library's where the program had its own. A module the preload imported keeps what it
    imported (python3 would have given it the program's)."""
    for stem in names:
        if stem in sys.modules and stem not in _STARTUP and stem not in sys.builtin_module_names:
            for key in [key for key in sys.modules if key == stem or key.startswith(stem + ".")]:
                del sys.modules[key]


def set_signal(signum: int, handler: Any) -> None:
    """``signal.signal`` without turning the old handler into an enum member on the way out: that is
    Python code (enum's lookup) whose first use in a fresh run's process cost ~120 page faults
    (~0.5 ms, a quarter of a ``print(1)`` run)."""
    _signal.signal(int(signum), handler if callable(handler) else int(handler))  # (SIG_DFL: a plain int here)
