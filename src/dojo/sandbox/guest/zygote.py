"""The slot zygote: the process that lives inside a slot's namespaces and forks one child per run.
This module is its request loop (``Zygote``) and its entry point (``main``); the parts it is made
of are the other ``dojo.sandbox.guest`` modules.

It runs *inside* the sandbox under a plain system interpreter (``python3 -S -E -s``), so the guest
modules import nothing but the standard library. The host compiles them with that interpreter and
ships them on the zygote's stdin, in import order; a small bootstrap makes each a module and calls
``main`` (``dojo.sandbox.slot``).

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

The parts, in import order (each imports only those before it):

- ``wire``: the framing and the typed messages, shared with the host (``RunStep``, ``RunLimits``,
  ``RunReply``);
- ``syscalls``: libc (mounts, namespaces, prctl, syscall filters, the raw fork);
- ``capture``: the one output pump, the one limit classifier of both run paths, and the fetch's reads;
- ``cgroup``: per-run memory and pids limits, peak memory, OOM kills;
- ``jail``: loopback, the new root, hidden paths, the watched IPC namespace, scratch wiping;
- ``child``: a run's process: its set-up (``RunChild.child``) and the inline-Python run path;
- ``forker``: the zygote's end of the forker (``forker.c``);
- ``judge``: the zygote's end of the slot's judge, the trusted side of judged grading runs;
- ``processes``: a run's process made (forker, own fork, spare) and every process ended;
- ``oneshot``: the one-shot run path (``OneShotRun.run_step``);
- ``preload``: the modules imported and the run rehearsed once per slot, an environment's imports;
- ``sessions``: the session worker, a session's persistent interpreter;
- ``zygote``: this module: set-up, one request (files in, steps, files out), the loop, ``main``.
"""

from __future__ import annotations

import errno
import os
import signal
import socket
import stat
import sys
import time
from collections.abc import Callable
from typing import Any

from dojo.sandbox.guest.capture import read_file
from dojo.sandbox.guest.cgroup import CgroupHandle
from dojo.sandbox.guest.child import note_startup_modules, set_signal
from dojo.sandbox.guest.forker import Forker
from dojo.sandbox.guest.jail import BOX, Jail
from dojo.sandbox.guest.judge import Judge
from dojo.sandbox.guest.oneshot import OneShotRun
from dojo.sandbox.guest.preload import preload, preload_environment
from dojo.sandbox.guest.processes import Spare
from dojo.sandbox.guest.sessions import Sessions, write_session_file
from dojo.sandbox.guest.syscalls import PR_SET_NO_NEW_PRIVS, Syscalls
from dojo.sandbox.guest.wire import (
    Blob,
    RunStep,
    encode_frame,
    read_frame,
    read_frame_into,
    read_header,
    read_into,
    wipe,
    write_all,
    write_frame,
)


class Zygote(OneShotRun):
    """The slot's zygote: its set-up (``setup``), one request (``handle``) and the loop (``serve``)."""

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
        self.reply_blobs: list[Blob] = []  # the reply's blobs as they are made, zeroed once it is written
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
        self.judge = Judge()  # forked at the first judged grading run (``OneShotRun.judged``)
        if config.get("forker") and not self.spares:
            try:
                self.forker = Forker(config["forker"], self.sys)
            except OSError as e:
                self.forker_error = f"{type(e).__name__}: {e}"
        self.blockable_signals = signal.valid_signals() - {signal.SIGKILL, signal.SIGSTOP}

    # -- set-up --------------------------------------------------------------------------------

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
        if not self.rootless:  # root's groups: nothing here needs them, and a fetch must not have them
            os.setgroups([])
        # No run may gain privileges through execve (setuid files, file capabilities). The zygote
        # itself never execs, so it sets this once and every child inherits it.
        self.sys.prctl(PR_SET_NO_NEW_PRIVS, 1)
        try:  # needs CAP_SYS_RESOURCE; without it, children at +1000 are still chosen first
            with open("/proc/self/oom_score_adj", "w") as f:
                f.write("-1000")
        except OSError:
            pass
        self.prebuild_streams()
        preload_environment(self.config)
        self.vm_size = preload(self.sys.libc)
        self.note_numpy_state()
        self.note_recursion_budget()
        self.use_environment({})
        if self.zygote_filter is not None:  # from here on, for the zygote and every run it forks
            self.sys.install_filter(self.zygote_filter)
        # As PID 1 the zygote never sees what its namespace sends it without a handler; Python's
        # SIGINT handler would let a run (rootless: the same user) raise KeyboardInterrupt in it
        # and end the slot. Each Python run gets the handler back (``RunChild.child``).
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
        header, _, blen = read_header(fd)
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
            read_into(fd, view[offset : offset + n])
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

    def handle(self, header: dict[str, Any], blobs: list[bytes]) -> tuple[dict[str, Any], list[Blob]]:
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

    def handle_request(self, header: dict[str, Any], blobs: list[bytes]) -> tuple[dict[str, Any], list[Blob]]:
        out_blobs: list[Blob] = []
        self.reply_blobs = out_blobs  # (zeroed by ``serve`` whatever happens, and in a forker forked meanwhile)
        self.marks = [("start", time.perf_counter())]
        if header.get("keep_files"):  # a session: the work dir is the program's; write as its uid
            self.spares = False  # a session's slot: its processes are the session's own
            self.discard_spare()
            self.jail.box_files = None  # the session's files: /box is listed when it is next wiped
            refused = self.write_files_as_user(header.get("files", []), blobs)
            if refused is not None:  # nothing runs, nothing ends: the host refuses the call (FileRefused)
                return {"steps": [], "fetched": [], "file_refused": refused}, out_blobs
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
                    write_all(fd, blobs[f["blob"]])
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
            cap, total = int(header.get("fetch_max_bytes", 1 << 20)), header.get("fetch_total_bytes")
            fetched = self.fetch(header["fetch"], cap, out_blobs, None if total is None else int(total))
        self.marks.append(("end", time.perf_counter()))
        t0 = self.marks[0][1]
        timings = {name: round((t - t0) * 1e6) for name, t in self.marks}
        return {"steps": steps_out, "fetched": fetched, "timings_us": timings}, out_blobs

    # -- the request's files, read and written as the run's user ---------------------------------

    def fetch(
        self, paths: list[str], max_bytes: int, out_blobs: list[Blob], total_bytes: int | None = None
    ) -> list[dict[str, Any]]:
        """Read requested files as the run uid, each up to ``max_bytes`` and all of them up to
        ``total_bytes`` (a file past it is truncated) (never as root: a symlink must not leak host files).
        Only regular files: a FIFO the run left at the path would block the read forever (the slot
        would die, and a repo grading read as an infrastructure error: a forger's way to dodge a
        score of 0), a device would read without end. They are opened without waiting. And only files
        of the run's scratch file systems (/box, /tmp, /dev/shm): a symlink the run left may point
        anywhere, and ``/proc/self`` is the reader's, so ``/proc/self/fd/N`` reopened the zygote's
        own descriptors (the slot's cgroup files, its IPC tables) and ``/proc/self/*`` showed its
        command line and state."""

        def work() -> tuple[list[dict[str, Any]], list[Blob]]:
            results: list[dict[str, Any]] = []
            blobs: list[Blob] = []
            scratch = self.jail.scratch_devices
            left = max_bytes * len(paths) if total_bytes is None else total_bytes
            for p in paths:
                try:
                    fd = os.open(os.path.join(BOX, p), os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
                    try:
                        st = os.fstat(fd)
                        if not stat.S_ISREG(st.st_mode):
                            raise OSError(errno.EINVAL, "not a regular file")
                        if st.st_dev not in scratch:
                            raise OSError(errno.EXDEV, "not a file the run wrote (/box, /tmp or /dev/shm)")
                        cap = min(max_bytes, left)
                        data = read_file(fd, cap)  # (into a buffer zeroed after the reply, ``serve``)
                    finally:
                        os.close(fd)
                    results.append({"path": p, "blob": len(blobs), "truncated": len(data) > cap})
                    blobs.append(data[:cap])
                    left -= len(blobs[-1])
                    wipe([data[cap:]])  # (the byte read past the cap: kept nowhere)
                except OSError as e:
                    results.append({"path": p, "blob": None, "error": e.strerror or str(e)})
            return results, blobs

        fetched, blobs = self.as_user(work) if self.rootless else self.as_run_identity(work)
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

    def as_run_identity(self, work: Callable[[], tuple[Any, list[Blob]]]) -> tuple[Any, list[Blob]]:
        """Run ``work()`` here with the run's uid and gid as this process's filesystem identity (root
        mode: the zygote has no supplementary group, ``setup``), so every file access is checked as
        the run's: a symlink the run left to a file it cannot read stays unread. In ``as_user``'s
        forked child the fetch of an analysis run's answer file cost ~12 ms of CPU (a fork of a
        zygote that has imported pandas), here nothing."""
        self.sys.file_identity(self.uid, self.uid)
        try:
            return work()
        finally:
            self.sys.file_identity(0, 0)

    def as_user(self, work: Any) -> tuple[Any, list[Blob]]:
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
                write_all(w, encode_frame({"value": value}, blobs))
            except BaseException as e:
                status = 1
                try:
                    write_all(w, encode_frame({"error": f"{type(e).__name__}: {e}"}, []))
                except BaseException:
                    pass
            finally:
                os._exit(status)
        os.close(w)
        try:
            header, blobs = read_frame_into(r)  # (views of one buffer, zeroed after the reply)
        finally:
            os.close(r)
            os.waitpid(pid, 0)
        if "error" in header:
            raise OSError(header["error"])
        return header["value"], blobs

    def write_files_as_user(self, files: list[dict[str, Any]], blobs: list[bytes]) -> str | None:
        """Write a session's files as its user (``write_session_file``: regular files only, never
        waiting); why the first one was refused, or None. A refusal is an answer, not a failure: a
        failed request reaps every process of the slot, the session's interpreter too."""

        def work() -> tuple[str | None, list[Blob]]:
            for f in files:
                try:
                    write_session_file(f["path"], blobs[f["blob"]], f.get("mode", 0o644), bool(f.get("replace")))
                except (OSError, ValueError) as e:
                    return (str(e) if isinstance(e, ValueError) else f"{f['path']!r}: {e.strerror or e}"), []
            return None, []

        if not files:
            return None
        try:
            refused: str | None = self.as_user(work)[0]
        except BlockingIOError:  # (the fork, at the session's process limit: its own processes fill it)
            return "no process is left to write it with: the session's processes are at its limit; end some"
        return refused

    # -- main loop -----------------------------------------------------------------------------

    def serve(self, rfd: int, wfd: int) -> None:
        self.fork_spare((rfd, wfd))
        while True:
            try:
                header, blobs = self.read_request(rfd)
            except EOFError:
                return
            out_blobs: list[Blob] = []
            try:
                resp, out_blobs = self.handle(header, blobs)
            except Exception as e:
                self.reap_all()
                resp = {"error": f"{type(e).__name__}: {e}"}
            finally:
                del blobs
                self.scrub()
            resp["id"] = header.get("id")
            try:
                write_frame(wfd, resp, out_blobs)
            finally:  # no run's output or file stays in this process's memory (``guest.capture``),
                wipe(self.reply_blobs)  # a failed request's steps' included
                self.reply_blobs = []
                del out_blobs
            if header.get("last"):
                return
            self.fork_spare((rfd, wfd))


def main() -> None:
    """The zygote's entry point (the bootstrap calls it once every guest module is loaded)."""
    # A run must find ``sys.modules`` as it was when the zygote was one file run as ``__main__``: no
    # ``dojo`` there (a run's ``import dojo`` fails, or finds its own files). The guest modules go on
    # as their functions' globals; none imports another later than at its top level.
    for name in [name for name in sys.modules if name == "dojo" or name.startswith("dojo.")]:
        del sys.modules[name]
    note_startup_modules(getattr(sys.modules["__main__"], "_dojo_startup", ()))
    config, _ = read_frame(0)  # (after the code, on stdin: every run could read an argument in /proc/self/cmdline)
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
        error = f"{type(e).__name__}: {e} ({os.path.basename(where.filename)}:{where.lineno} {where.line})"
        write_all(wfd, encode_frame({"ready": False, "error": error}, []))
        os._exit(1)
    write_all(wfd, encode_frame({"ready": True, "forker_error": zygote.forker_error}, []))
    zygote.serve(rfd, wfd)
    os._exit(0)
