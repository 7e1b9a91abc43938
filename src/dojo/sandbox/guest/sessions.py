"""A session's persistent Python interpreter (its variables live between execs): ``Sessions``
forks the session worker on first use (set up as any run, ``RunChild.child``) and meters each exec
sent to it; ``Sessions.session_worker_loop`` is the worker's side.

Runs inside the sandbox, in the zygote and the session worker: standard library only.
"""

from __future__ import annotations

import builtins
import json
import os
import select
import stat
import sys
import time
import types
from typing import TYPE_CHECKING, Any, TypedDict, cast

from dojo.sandbox.guest.capture import Capture, classify_limit, out_of_memory, stdio_pipe
from dojo.sandbox.guest.child import forget_modules
from dojo.sandbox.guest.ending import (
    exit_status,
    files_left_open,
    flush_open_files,
    flush_streams,
    print_program_error,
)
from dojo.sandbox.guest.jail import BOX
from dojo.sandbox.guest.wire import (
    FRAME_PREFIX,
    Blob,
    RunLimits,
    RunReply,
    RunStep,
    encode_frame,
    read_frame,
    write_all,
)

if TYPE_CHECKING:
    from dojo.sandbox.guest.zygote import Zygote

# How a session's file and its directories are opened: never through a symlink, never waiting (a
# FIFO's open waits for its other end), never making a terminal ours.
NO_WAIT = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
KINDS = ((stat.S_ISREG, "a regular file"), (stat.S_ISDIR, "a directory"), (stat.S_ISLNK, "a symlink"),
         (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
         (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))  # fmt: skip


def kind_of(mode: int) -> str:
    return next((name for test, name in KINDS if test(mode)), "not a regular file")


def refusal(where: str, dir_fd: int, name: str, error: OSError, wanted: str) -> ValueError:
    """Why ``name`` (in ``dir_fd``; ``where`` in /box) could not be opened as ``wanted``."""
    try:
        found = kind_of(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        found = wanted
    if found == wanted:  # (permission denied, no space left, ...)
        return ValueError(f"{where!r}: {error.strerror or error}")
    return ValueError(f"{where!r} is {found}, not {wanted}")


def write_session_file(path: str, data: bytes | memoryview, mode: int, replace: bool) -> None:
    """Write ``data`` to ``path`` (relative to /box) in a session, as its user (``Zygote.as_user``).

    A session's work dir is its program's: any name on the path may be a symlink, a FIFO, a socket
    or a directory it left there. A FIFO's plain open would wait for a reader (the slot would stop
    answering and be killed, the session with it); a symlink's would write wherever it points. So
    each directory is opened as a directory with ``NO_WAIT``, anything at the file's name but a
    regular file is refused (ValueError: what is where), and the data goes to a new file renamed
    over it. ``replace`` (the files of an exec, which
    the session writes anew each time) first unlinks whatever is at the file's name but a
    directory."""
    parts = path.split("/")
    dir_fd = os.open(BOX, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for i, name in enumerate(parts[:-1]):
            try:
                os.mkdir(name, 0o755, dir_fd=dir_fd)
            except FileExistsError:
                pass
            try:
                sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY | NO_WAIT, dir_fd=dir_fd)
            except OSError as e:
                raise refusal("/".join(parts[: i + 1]), dir_fd, name, e, "a directory") from None
            os.close(dir_fd)
            dir_fd = sub
        name = parts[-1]
        if replace:
            try:
                if not stat.S_ISDIR(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode):
                    os.unlink(name, dir_fd=dir_fd)
            except FileNotFoundError:
                pass
        try:
            found = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
        except FileNotFoundError:
            found = stat.S_IFREG
        if not stat.S_ISREG(found):
            raise ValueError(f"{path!r} is {kind_of(found)}, not a regular file")
        # written beside it, then renamed over it: a write that fails (a full work dir) leaves the
        # file as it was (truncated first, it had lost its content); a rename never follows a link
        # or waits on a FIFO swapped in meanwhile
        temporary = f".dojo-write-{os.getpid()}-{os.urandom(4).hex()}"  # (no import: a module the zygote
        # imports is one a run's own copy in /box cannot shadow, which the harness's tests count on)
        try:
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | NO_WAIT, mode, dir_fd=dir_fd)
        except OSError as e:
            raise ValueError(f"{path!r}: {e.strerror or e}") from None
        try:
            try:
                os.fchmod(fd, mode)  # (the umask's bits too)
                write_all(fd, data)
            finally:
                os.close(fd)
            os.rename(temporary, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except OSError as e:
            try:
                os.unlink(temporary, dir_fd=dir_fd)
            except OSError:
                pass
            if isinstance(e, (IsADirectoryError, NotADirectoryError)):
                raise ValueError(f"{path!r} is a directory, not a regular file") from None
            raise ValueError(f"{path!r}: {e.strerror or e}") from None
    finally:
        os.close(dir_fd)


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
        out_r, out_w = stdio_pipe()
        err_r, err_w = stdio_pipe()
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

    def run(self, step: RunStep, stdin: bytes, req: dict[str, Any]) -> tuple[RunReply, Blob, Blob]:
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
            write_all(w["ctl"], encode_frame({"exec": True}, [step["code"].encode(), stdin]))
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
        if limit is None and address_space and done and done.get("status") and out_of_memory(capture.err):
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
        return res, capture.out, capture.err  # (views of buffers the zygote zeroes after its reply)

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
        names = os.listdir(BOX)
        own = [n for n in names if n.endswith((".py", ".pyc", ".so")) or os.path.isfile(f"{BOX}/{n}/__init__.py")]
        forget_modules([name.partition(".")[0] for name in own])  # (the modules of the session's files)
        if "random" in sys.modules:
            sys.modules["random"].seed()
        main = types.ModuleType("__main__")
        main.__builtins__ = builtins  # type: ignore[attr-defined]
        sys.modules["__main__"] = main
        n = 0
        while True:
            try:
                _, blobs = read_frame(ctl)
            except EOFError:
                os._exit(0)
            n += 1
            code, stdin = blobs[0].decode("utf-8", errors="replace"), blobs[1]
            sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8", errors="surrogateescape", newline="\n")
            status = 0
            ended = False
            uncaught: BaseException | None = None
            try:
                # compiled here, not by ast.parse: a syntax error's traceback then starts at the cell
                # (no frame of ast.py); dont_inherit: this module's ``from __future__ import
                # annotations`` is not the cell's
                filename = f"<exec {n}>"
                tree = cast("ast.Module", compile(code, filename, "exec", ast.PyCF_ONLY_AST, dont_inherit=True))
                last = tree.body[-1] if tree.body and isinstance(tree.body[-1], ast.Expr) else None
                if last is not None:
                    tree.body.pop()
                exec(compile(tree, filename, "exec", dont_inherit=True), main.__dict__)
                if last is not None:
                    value = eval(
                        compile(ast.Expression(last.value), filename, "eval", dont_inherit=True), main.__dict__
                    )
                    if value is not None:
                        print(repr(value))
            except SystemExit as e:
                status = exit_status(e)
                ended = True
            except BaseException as e:
                uncaught = e
            if uncaught is not None:  # (printed outside the handler, as in ``RunChild``; this loop's frame left out)
                hook_exit = print_program_error(uncaught)
                status = 1
                if hook_exit is not None:  # the program's sys.excepthook ended the interpreter
                    status, ended = exit_status(hook_exit), True
            flush_streams()
            if ended and files_left_open(own=2):  # (ctl, status_fd; flushed as the interpreter's exit flushes them)
                flush_open_files()
            write_all(status_fd, encode_frame({"status": status, "ended": ended}, []))
            if ended:
                os._exit(status)
