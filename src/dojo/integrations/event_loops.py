"""Event-loop plumbing the trainer integrations share: a private loop thread for synchronous
callers, and one warm sandbox pool per event loop."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from dojo.cluster import sandbox_for
from dojo.sandbox import SandboxAPI

T = TypeVar("T")


class BackgroundLoop:
    """An event loop on a daemon thread, started on first use: lets synchronous callers (TRL's
    reward functions and ``rollout_func``) drive dojo's async sandbox."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        with self._lock:
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
                self._thread = threading.Thread(target=self._loop.run_forever, name=self.name, daemon=True)
                self._thread.start()
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    @property
    def started(self) -> bool:
        return self._loop is not None

    def stop(self) -> None:
        """Stop the loop and its thread (``stop_loop_thread``)."""
        loop, thread = self._loop, self._thread
        if loop is None:
            return
        self._loop = self._thread = None
        stop_loop_thread(loop, thread)


def stop_loop_thread(loop: asyncio.AbstractEventLoop, thread: threading.Thread | None) -> None:
    """Stop an event loop that runs forever on ``thread``, join the thread, and close the loop with
    its default executor's threads (left running, each stopped loop kept its ``asyncio_N`` threads
    for the process's life). Bounded: 30 s for the executor's work, 5 s for the thread."""
    with contextlib.suppress(RuntimeError, TimeoutError):  # the loop was stopped or closed already
        asyncio.run_coroutine_threadsafe(loop.shutdown_default_executor(), loop).result(timeout=30)
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(loop.stop)
    if thread is not None:
        thread.join(timeout=5)
    if (thread is None or not thread.is_alive()) and not loop.is_running():
        loop.close()


class LoopSandboxes:
    """One warm sandbox pool per event loop, started on first use, shared by every environment."""

    def __init__(self) -> None:
        self._by_loop: dict[asyncio.AbstractEventLoop, SandboxAPI] = {}
        self._starting: dict[asyncio.AbstractEventLoop, asyncio.Lock] = {}

    async def get(self, pool_size: int, ray: str | None = None) -> SandboxAPI:
        """This loop's sandbox: the fleet of the Ray cluster at ``ray`` (``pool_size`` slots per
        node), else a local pool of ``pool_size`` slots."""
        loop = asyncio.get_running_loop()
        lock = self._starting.setdefault(loop, asyncio.Lock())
        async with lock:
            if loop not in self._by_loop:
                self._by_loop[loop] = await sandbox_for(ray, pool_size).start()
        return self._by_loop[loop]

    async def close(self) -> None:
        loop = asyncio.get_running_loop()
        sandbox = self._by_loop.pop(loop, None)
        self._starting.pop(loop, None)
        if sandbox is not None:
            await sandbox.close()


SANDBOXES = LoopSandboxes()  # shared by DojoToolEnv, DojoRollout and the verl tool and agent loop
