"""How much time an episode's tools used: ``SlotClock``, read by the tool time budget
(``EpisodeConfig.tool_time_limit``).

The clock counts the seconds a tool call held one of the scheduler's slots, less what its runs
waited for the sandbox: the host's own time for the call (no run under way: a visible check's
grading, a document's parse), and the time some run of it was running by the sandbox's account
(each run's last ``wall`` seconds, as it reports them, its compile step's included; runs side by
side counted once). It had counted the whole hold; the scheduler's slots are twice the pool's by
default, so a run holding one could still wait in the pool's own queue for about one run: on a
fleet shared with episodes whose runs sleep to their limit, an honest episode's budget was spent on
its neighbours' runs and it ended ``tool_time_limit``, graded, for the fleet's doing.
``MeteredSandbox`` is the sandbox the tools run on: every run it returns within a clock's ``held``
block is entered in that block's account.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import time
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from typing import Any, Self

from dojo.sandbox import ExecutionResult, Limits, Program, SandboxAPI, Verdict
from dojo.sandbox.backend import SessionAPI

# (sent, answered, reported wall time) of each run in the current ``held`` block
_ACCOUNT: contextvars.ContextVar[list[tuple[float, float, float]] | None] = contextvars.ContextVar(
    "dojo_sandbox_account", default=None
)


def run_seconds(result: ExecutionResult) -> float:
    """The sandbox's own wall time for ``result``'s run, its compile step included (a compile
    error's result is its compile step: counted once), unless that step is a cached build's (it did
    not run for this program: a cached compile error counts nothing)."""
    step = result.compile
    if step is not None and step.cached:
        return 0.0 if result.verdict is Verdict.COMPILE_ERROR else result.wall_time
    compiled = step is not None and result.verdict is not Verdict.COMPILE_ERROR
    return result.wall_time + (step.wall_time if compiled and step else 0.0)


def _length(intervals: Iterable[tuple[float, float]]) -> float:
    """The length of the union of ``intervals``."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


def tool_seconds(start: float, end: float, runs: list[tuple[float, float, float]]) -> float:
    """A block's count (see the module doc): from ``start`` to ``end``, the time no run was under
    way, plus the time some run was running (``runs``: each one's sent, answered and wall time)."""
    under_way = _length((sent, answered) for sent, answered, _ in runs)
    running = _length((max(sent, answered - wall), answered) for sent, answered, wall in runs)
    return max(0.0, end - start - under_way) + running


class MeteredSandbox:
    """``inner``, whose runs are counted by the ``SlotClock.held`` block they finish in (a grader's
    runs too: a visible check's grader runs on it). Everything else is ``inner``'s."""

    def __init__(self, inner: SandboxAPI) -> None:
        self.inner = inner

    @property
    def pool_size(self) -> int:
        return self.inner.pool_size

    @property
    def started(self) -> bool:
        return self.inner.started

    async def start(self) -> Self:
        await self.inner.start()
        return self

    async def close(self) -> None:
        await self.inner.close()

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def run(self, program: Program, limits: Limits | None = None, **options: Any) -> ExecutionResult:
        """``inner.run`` (``options``: its keyword arguments, as ``SandboxAPI.run`` names them)."""
        sent = time.perf_counter()
        result = await self.inner.run(program, limits, **options)
        account = _ACCOUNT.get()
        if account is not None:
            account.append((sent, time.perf_counter(), run_seconds(result)))
        return result

    async def run_many(self, programs: Iterable[Program], limits: Limits | None = None) -> list[ExecutionResult]:
        # (each timed on its own: AsyncSandbox's and the fleet's run_many are this gather too)
        return list(await asyncio.gather(*(self.run(p, limits) for p in programs)))

    async def open_session(
        self, language: str, limits: Limits | None = None, environment: str | None = None
    ) -> SessionAPI:
        return await self.inner.open_session(language, limits, environment)


def held(slots: asyncio.Semaphore | None) -> AbstractAsyncContextManager[object]:
    """Hold one of ``slots`` for the block (no limit when None)."""
    return slots if slots is not None else contextlib.nullcontext()


class SlotClock:
    """The time an episode's tool calls used (see the module doc: ``tool_seconds`` of each ``held``
    block; blocks do not nest). A policy whose runs kept the sandbox
    busy until the wall-clock deadline had turned its 0 into no reward; the budget ends that.
    ``paused`` (the episode's) is entered for each wait on the sandbox, queueing included: the
    deadline stops meanwhile, since the sandbox bounds each run and the budget the runs together."""

    def __init__(
        self,
        slots: asyncio.Semaphore | None,
        budget: float | None = None,
        paused: Callable[[], AbstractContextManager[None]] | None = None,
    ) -> None:
        self.slots = slots
        self.budget = budget
        self.paused = paused or contextlib.nullcontext
        self.seconds = 0.0

    @property
    def spent(self) -> bool:
        return self.budget is not None and self.seconds >= self.budget

    @contextlib.asynccontextmanager
    async def held(self) -> AsyncIterator[None]:
        """Hold a slot for the block, and count its time less its runs' waits for the sandbox."""
        with self.paused():
            async with held(self.slots):
                account: list[tuple[float, float, float]] = []
                token = _ACCOUNT.set(account)
                start = time.perf_counter()
                try:
                    yield
                finally:
                    _ACCOUNT.reset(token)
                    self.seconds += tool_seconds(start, time.perf_counter(), account)
