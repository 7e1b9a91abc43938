"""Slots start without Python in a forked child and without blocking the event loop (issue #32).

Each test runs on asyncio's loop and on uvloop (whose subprocess spawn ran Python's at-fork handlers in
the child and froze a test process forever when one of them waited on a lock held at the fork).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import subprocess
import threading
from collections.abc import Callable, Coroutine
from typing import Any

import httpx
import pytest

from dojo.sandbox import AsyncSandbox, Program
from dojo.sandbox import spawn as spawn_module
from dojo.sandbox.languages import default_python
from dojo.sandbox.slot import compiled_zygote
from dojo.sandbox.spawn import spawn
from tests.sandbox.conftest import requires_isolation

uvloop = pytest.importorskip("uvloop")

LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "asyncio": asyncio.new_event_loop,
    "uvloop": uvloop.new_event_loop,
}


def run_on(loop_name: str, main: Callable[[], Coroutine[Any, Any, None]]) -> None:
    with asyncio.Runner(loop_factory=LOOPS[loop_name]) as runner:
        runner.run(main())


# An at-fork handler that, armed, records that it ran and then waits on a lock another thread held
# at the fork (in a forked child nobody ever releases it: the way an OpenSSL context being freed
# froze the suite). The wait is bounded so that a regression fails instead of hanging.
_ARMED: dict[str, int] = {}
_HELD_AT_FORK = threading.Lock()


def _child_after_fork() -> None:
    fd = _ARMED.get("fd")
    if fd is not None:
        os.write(fd, b"!")
        _HELD_AT_FORK.acquire(timeout=20)


os.register_at_fork(after_in_child=_child_after_fork)


async def until(predicate: Callable[[], bool]) -> None:
    async with asyncio.timeout(30):
        while not predicate():
            await asyncio.sleep(0.01)


async def print_one(sb: AsyncSandbox) -> None:
    result = await sb.run(Program(language="python", source="print(1)"))
    assert result.stdout == "1\n", result


@requires_isolation
@pytest.mark.parametrize("loop_name", LOOPS)
def test_a_slot_start_calls_no_at_fork_handler_and_a_held_lock_does_not_stop_it(loop_name: str) -> None:
    marker_r, marker_w = os.pipe()
    holder_done = threading.Event()
    release = threading.Event()

    def hold_locks() -> None:  # holds our handler's lock and logging's module lock meanwhile
        with _HELD_AT_FORK:
            logging._acquireLock()  # type: ignore[attr-defined]
            try:
                release.wait(60)
            finally:
                logging._releaseLock()  # type: ignore[attr-defined]
        holder_done.set()

    async def warm_up() -> None:  # every module the start imports is imported (imports take logging's lock)
        async with AsyncSandbox(pool_size=1) as sb:
            await print_one(sb)

    run_on(loop_name, warm_up)
    holder = threading.Thread(target=hold_locks)
    holder.start()
    _ARMED["fd"] = marker_w
    try:

        async def main() -> None:
            async with AsyncSandbox(pool_size=4) as sb:
                await asyncio.gather(*(print_one(sb) for _ in range(8)))
                # the slots started and ran while the other thread still held both locks
                assert not holder_done.is_set()

        run_on(loop_name, main)
    finally:
        _ARMED.clear()
        release.set()
        holder.join(70)
        os.set_blocking(marker_r, False)
        try:
            ran = os.read(marker_r, 100)
        except BlockingIOError:
            ran = b""
        os.close(marker_r)
        os.close(marker_w)
    assert ran == b"", f"an at-fork handler ran in {len(ran)} forked child(ren)"


@requires_isolation
@pytest.mark.parametrize("loop_name", LOOPS)
def test_the_loop_serves_requests_while_16_slots_start(loop_name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every process start is held inside ``Popen`` until 16 are waiting at once; meanwhile an HTTP
    server on the same loop answers 20 requests. A spawn on the loop's thread would block it at the
    first one (and the 16 would never be waiting together)."""
    real_popen = subprocess.Popen
    waiting = 0
    count_lock = threading.Lock()
    release = threading.Event()

    def held_popen(*args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
        nonlocal waiting
        if threading.current_thread().name != "dojo-spawn":  # the start's own probes (rootless: several)
            return real_popen(*args, **kwargs)
        with count_lock:
            waiting += 1
        release.wait(30)
        return real_popen(*args, **kwargs)

    async def main() -> None:
        await compiled_zygote(default_python())  # compiled before the hold (one spawn, not a slot)

        async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok")
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(answer, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        monkeypatch.setattr(spawn_module.subprocess, "Popen", held_popen)
        sb = AsyncSandbox(pool_size=16)
        starting = asyncio.create_task(sb.start())
        try:
            await until(lambda: waiting == 16)
            async with httpx.AsyncClient() as client:
                for _ in range(20):
                    response = await client.get(f"http://127.0.0.1:{port}/")
                    assert response.text == "ok"
            assert not starting.done()
            release.set()
            await starting
            await asyncio.gather(*(print_one(sb) for _ in range(16)))
        finally:
            release.set()
            monkeypatch.undo()
            await sb.close()
            server.close()
            await server.wait_closed()

    run_on(loop_name, main)


@pytest.mark.parametrize("loop_name", LOOPS)
def test_spawned_process_pipes_exit_status_and_kill(loop_name: str) -> None:
    async def main() -> None:
        proc = await spawn(["cat"], {"PATH": "/usr/bin:/bin"}, stdin=True, stdout=True)
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(b"hello\n")
        await proc.stdin.drain()
        assert await proc.stdout.readline() == b"hello\n"
        proc.stdin.close()
        assert await proc.wait() == 0
        proc.close()

        sleeper = await spawn(["sleep", "60"], {"PATH": "/usr/bin:/bin"})
        sleeper.kill()
        assert await sleeper.wait() == -9
        sleeper.kill()  # reaped: not signalled again

        env_only = await spawn(["env"], {"PATH": "/usr/bin:/bin", "ONLY": "this"}, stdout=True)
        out, _ = await env_only.communicate()
        assert sorted(out.decode().split()) == ["ONLY=this", "PATH=/usr/bin:/bin"]
        env_only.close()

        with pytest.raises(FileNotFoundError):
            await spawn(["/nonexistent/program"], {})

    run_on(loop_name, main)


def test_spawn_waits_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """A start that never returns is a TimeoutError, not a hang; a process that starts after the caller
    gave up is killed (nothing outlives its caller)."""
    real_popen = subprocess.Popen
    late: list[subprocess.Popen[bytes]] = []
    release = threading.Event()

    def slow_popen(*args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
        release.wait(30)
        proc = real_popen(*args, **kwargs)
        late.append(proc)
        return proc

    monkeypatch.setattr(spawn_module.subprocess, "Popen", slow_popen)
    monkeypatch.setattr(spawn_module, "SPAWN_TIMEOUT", 0.2)

    async def main() -> None:
        with pytest.raises(TimeoutError):
            await spawn(["sleep", "60"], {"PATH": "/usr/bin:/bin"})
        release.set()
        await until(lambda: bool(late) and late[0].poll() is not None)

    run_on("asyncio", main)
    assert late[0].returncode == -9


@pytest.mark.parametrize("loop_name", LOOPS)
def test_each_pipe_fd_is_closed_once_and_a_file_that_takes_its_number_stays_open(
    loop_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """uvloop's pipe transport lets libuv close the fd and then calls the pipe object's ``close`` as
    well: a file another thread opened in between got the same number and was closed under it (a
    spawn failed with EBADF under bench/soak.py). Here a file is opened at that very moment, taking
    the lowest free number: it stays open. And once closed, no fd of the spawn's is left open."""
    squatters: list[int] = []
    real_close = spawn_module.PipeEnd.close

    def close_with_a_squatter(end: spawn_module.PipeEnd) -> None:
        squatters.append(os.open("/dev/null", os.O_RDONLY))
        real_close(end)

    monkeypatch.setattr(spawn_module.PipeEnd, "close", close_with_a_squatter)

    def open_fds() -> set[int]:
        listed = {int(fd) for fd in os.listdir("/proc/self/fd")}  # the listing's own fd is closed by now
        return {fd for fd in listed if not _closed(fd)}

    async def cat() -> None:
        proc = await spawn(["cat"], {"PATH": "/usr/bin:/bin"}, stdin=True, stdout=True, stderr=True)
        assert proc.stdin is not None
        proc.stdin.write(b"x")
        proc.stdin.close()
        assert await proc.wait() == 0
        proc.close()
        await asyncio.sleep(0.05)  # a transport closes its pipe on the loop's next turn

    async def main() -> None:
        await cat()  # libuv opens /dev/null once, on its first spawn's pipes
        for fd in squatters:
            os.close(fd)
        squatters.clear()
        before = open_fds()
        await cat()
        assert len(squatters) == 3  # stdin, stdout and stderr
        for fd in squatters:
            os.fstat(fd)  # EBADF if it was closed under us
        left = open_fds() - before - set(squatters)
        assert left == set(), {fd: os.readlink(f"/proc/self/fd/{fd}") for fd in left}

    try:
        run_on(loop_name, main)
    finally:
        for fd in squatters:
            with contextlib.suppress(OSError):
                os.close(fd)


def _closed(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return True
    return False
