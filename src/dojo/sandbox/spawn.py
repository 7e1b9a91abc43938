"""Start a host process from async code without Python in a forked child and without blocking the loop.

``asyncio.create_subprocess_exec`` under uvloop goes through libuv's ``uv_spawn``: it forks, runs
Python's at-fork handlers in the child (MagicStack/uvloop#749) and blocks the parent, GIL held, until
the child execs. One such handler freeing an OpenSSL context whose lock another thread held at the
fork froze a whole test process forever (issue #32). Here the process is started by
``subprocess.Popen`` on a thread of its own: CPython's ``_posixsubprocess`` vforks and execs in C
(no at-fork handler runs without a ``preexec_fn``, and we never pass one), and the event loop only
waits for a future. The pipes are then attached to the running loop, and the exit is seen through a
pidfd (a thread that waits, on kernels without pidfds), so this works the same on asyncio's loop and
on uvloop.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import threading
from collections.abc import Mapping, Sequence

SPAWN_TIMEOUT = 30.0  # seconds for the exec to happen (it takes milliseconds; a bound all the same)


class SpawnedProcess:
    """A started process with asyncio streams on its pipes (the parts of ``asyncio.subprocess.Process``
    that dojo uses: ``pid``, ``stdin``, ``stdout``, ``stderr``, ``returncode``, ``wait``, ``kill``,
    ``communicate``), plus ``close`` to detach the pipes from the loop."""

    def __init__(self, popen: subprocess.Popen[bytes]) -> None:
        self._popen = popen
        self.pid = popen.pid
        self.stdin: asyncio.StreamWriter | None = None
        self.stdout: asyncio.StreamReader | None = None
        self.stderr: asyncio.StreamReader | None = None
        self._transports: list[asyncio.BaseTransport] = []
        self._exited = asyncio.get_running_loop().create_future()
        self._pidfd: int | None = None

    @property
    def returncode(self) -> int | None:
        return self._popen.returncode

    async def _attach(self, limit: int) -> None:
        loop = asyncio.get_running_loop()
        ends = _take_pipes(self._popen, loop)
        try:
            if "stdin" in ends:
                w_transport, w_protocol = await loop.connect_write_pipe(
                    asyncio.streams.FlowControlMixin, ends.pop("stdin")
                )
                self._transports.append(w_transport)
                self.stdin = asyncio.StreamWriter(w_transport, w_protocol, None, loop)
            if "stdout" in ends:
                self.stdout = await self._reader(loop, ends.pop("stdout"), limit)
            if "stderr" in ends:
                self.stderr = await self._reader(loop, ends.pop("stderr"), limit)
        finally:
            for end in ends.values():  # not handed to a transport (one failed): closed here
                end.close_now()
        self._watch_exit(loop)

    async def _reader(self, loop: asyncio.AbstractEventLoop, end: PipeEnd, limit: int) -> asyncio.StreamReader:
        reader = asyncio.StreamReader(limit=limit, loop=loop)
        transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), end)
        self._transports.append(transport)
        return reader

    def _watch_exit(self, loop: asyncio.AbstractEventLoop) -> None:
        try:
            self._pidfd = os.pidfd_open(self.pid)
        except OSError:  # no pidfds (Linux < 5.3): a thread waits instead
            name = f"dojo-wait-{self.pid}"
            threading.Thread(target=self._wait_in_thread, args=(loop,), name=name, daemon=True).start()
            return
        loop.add_reader(self._pidfd, self._on_exit)

    def _on_exit(self) -> None:
        if self._pidfd is not None:
            asyncio.get_running_loop().remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None
        self._popen.poll()  # reaps it: the pidfd is readable once it is a zombie
        if not self._exited.done():
            self._exited.set_result(None)

    def _wait_in_thread(self, loop: asyncio.AbstractEventLoop) -> None:
        self._popen.wait()
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            loop.call_soon_threadsafe(self._on_exit)

    async def wait(self) -> int:
        await asyncio.shield(self._exited)
        rc = self._popen.returncode
        assert rc is not None
        return rc

    def kill(self) -> None:
        """SIGKILL, unless it was already reaped (a pid is never signalled after its reuse)."""
        if self._popen.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self._popen.kill()

    def write(self, data: bytes) -> None:
        """Write to stdin; BrokenPipeError once the pipe is closed (the process died: uvloop's
        transport raises RuntimeError then, asyncio's writes nowhere and lets drain raise)."""
        assert self.stdin is not None
        try:
            self.stdin.write(data)
        except RuntimeError as e:
            raise BrokenPipeError(f"the process's stdin is closed: {e}") from e

    async def communicate(self) -> tuple[bytes, bytes]:
        """Close stdin, read stdout and stderr to their ends, wait for the exit."""
        if self.stdin is not None:
            self.stdin.close()
        out, err = await asyncio.gather(_read_all(self.stdout), _read_all(self.stderr))
        await self.wait()
        return out, err

    def close(self) -> None:
        """Detach the pipes from the loop (their fds are closed); the process itself is left as it is."""
        for transport in self._transports:
            transport.close()
        self._transports.clear()


class PipeEnd:
    """One end of a child's pipe, handed to a loop's pipe transport, which closes it exactly once.

    A transport made from a file object closes it; but uvloop's transport first lets libuv close the
    fd, and only then calls the file object's ``close`` as well, which closes the same fd number a
    second time: by then another thread (a spawn making its pipes, an accept, an open on an
    executor) may hold that number, and its fd is closed under it (a spawn then failed with EBADF in
    ``bench/soak.py``). So the transport gets this object: a plain fd, owned by nothing else (the
    ``Popen`` file objects are closed once it is taken from them), whose ``close`` closes it only
    on loops where nothing else does."""

    def __init__(self, fd: int, transport_closes_fd: bool) -> None:
        self._fd = fd
        self._transport_closes_fd = transport_closes_fd

    def fileno(self) -> int:
        return self._fd

    def close(self) -> None:
        """What the transport calls when it closes."""
        if not self._transport_closes_fd:
            self.close_now()
        self._fd = -1

    def close_now(self) -> None:
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self._fd)
        self._fd = -1


def _is_uvloop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        import uvloop
    except ImportError:
        return False
    return isinstance(loop, uvloop.Loop)


def _take_pipes(popen: subprocess.Popen[bytes], loop: asyncio.AbstractEventLoop) -> dict[str, PipeEnd]:
    """The child's pipes as fds of ours alone: each is duplicated and ``Popen``'s file object closed
    (a file object closes its fd when collected: once more, after the transport did)."""
    libuv = _is_uvloop(loop)  # libuv closes a pipe's fd itself
    ends: dict[str, PipeEnd] = {}
    for name in ("stdin", "stdout", "stderr"):
        stream = getattr(popen, name)
        if stream is not None:
            try:
                ends[name] = PipeEnd(os.dup(stream.fileno()), libuv)
            except BaseException:
                for end in ends.values():
                    end.close_now()
                raise
            finally:
                stream.close()
    return ends


async def _read_all(stream: asyncio.StreamReader | None) -> bytes:
    return await stream.read() if stream is not None else b""


async def spawn(
    argv: Sequence[str],
    env: Mapping[str, str],
    *,
    stdin: bool = False,
    stdout: bool = False,
    stderr: bool = False,
    limit: int = 1 << 16,
    start_new_session: bool = False,
) -> SpawnedProcess:
    """Start ``argv`` with ``env`` (nothing else of ours) and pipes where asked; the exec happens on a
    thread of its own, so neither the event loop nor any at-fork handler is involved in the fork.
    ``OSError`` if it cannot be started (no such program, no permission); ``TimeoutError`` past
    ``SPAWN_TIMEOUT`` (the process, should it start later, is killed)."""
    loop = asyncio.get_running_loop()
    started: asyncio.Future[subprocess.Popen[bytes]] = loop.create_future()
    pipe = subprocess.PIPE

    def give(popen: subprocess.Popen[bytes] | None, error: BaseException | None) -> None:
        if started.done():  # the caller gave up waiting: nobody owns this process
            if popen is not None:
                _discard(popen)
        elif error is not None:
            started.set_exception(error)
        else:
            started.set_result(popen)  # type: ignore[arg-type]

    def start() -> None:
        popen: subprocess.Popen[bytes] | None = None
        error: BaseException | None = None
        try:
            popen = subprocess.Popen(
                list(argv), env=dict(env), bufsize=0, close_fds=True, start_new_session=start_new_session,
                stdin=pipe if stdin else subprocess.DEVNULL, stdout=pipe if stdout else subprocess.DEVNULL,
                stderr=pipe if stderr else subprocess.DEVNULL,
            )  # fmt: skip
        except BaseException as e:  # handed to the caller, whatever it is
            error = e
        try:
            loop.call_soon_threadsafe(give, popen, error)
        except RuntimeError:  # the loop closed meanwhile
            if popen is not None:
                _discard(popen)

    threading.Thread(target=start, name="dojo-spawn", daemon=True).start()
    try:
        async with asyncio.timeout(SPAWN_TIMEOUT):
            popen = await asyncio.shield(started)
    except BaseException:
        if not started.done():
            started.cancel()
        elif not started.cancelled() and started.exception() is None:
            _discard(started.result())  # started just as we gave up
        raise
    proc = SpawnedProcess(popen)
    try:
        await proc._attach(limit)
    except BaseException:
        proc.kill()
        proc.close()
        _discard(popen)
        raise
    return proc


def _discard(popen: subprocess.Popen[bytes]) -> None:
    """Kill a process nobody will use and reap it on a thread (it dies at once: SIGKILL)."""
    with contextlib.suppress(ProcessLookupError):
        popen.kill()
    for stream in (popen.stdin, popen.stdout, popen.stderr):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()
    threading.Thread(target=popen.wait, name="dojo-reap", daemon=True).start()
