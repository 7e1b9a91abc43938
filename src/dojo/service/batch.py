"""``POST /v1/batch``: one program against N cases, or N programs, run through the slots, answered
in order; bounded in the answer's size, in time, and by the client's presence.

- Each case's result is written as JSON when it finishes, and the answer is those pieces joined: past
  ``max_answer_bytes`` the cases left are skipped (the answer had been built whole at the end, beside
  every result: see ``dojo.service.admission`` for what that cost).
- Past ``max_seconds`` the cases left are skipped: a batch of 1,024 cases of 300 s each, one at a
  time, would hold a slot for 85 hours.
- A client that disconnects stops the batch: the cases left are not started (an abandoned batch of
  12 cases of 4 s held both slots of a service for 25 s more). Runs under way end as they would.
- A case that raises (a missing environment: a 400) stops the batch the same way, and the batch
  raises once its other runs have ended: it had answered at once while its other workers went on
  starting cases, on slots its admission no longer counted.

``BatchResponse.stopped`` says why the cases marked skipped were not run.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from starlette.requests import Request

from dojo.service.schemas import BatchItem, BatchStop


class BatchAnswer:
    """The pieces of a batch's answer as its cases finish, and why it stopped early (if it did)."""

    def __init__(self, total: int, max_bytes: int) -> None:
        self.parts: list[bytes | None] = [None] * total
        self.max_bytes = max_bytes
        self.size = 0
        self.accepted = 0
        self.stopped: BatchStop | None = None

    def add(self, item: BatchItem, accepted: bool) -> bool:
        """Keep ``item``'s JSON; False (and the batch stops) when it would pass ``max_bytes``."""
        part = item.model_dump_json().encode()
        if self.size + len(part) > self.max_bytes:
            self.stop("answer_size")
            return False
        self.parts[item.index] = part
        self.size += len(part)
        self.accepted += accepted
        return True

    def stop(self, why: BatchStop) -> None:
        self.stopped = self.stopped or why

    def body(self) -> bytes:
        """``BatchResponse``'s JSON, the cases not run as skipped items."""
        parts = [p if p is not None else BatchItem(index=i, skipped=True).model_dump_json().encode()
                 for i, p in enumerate(self.parts)]  # fmt: skip
        tail = {"accepted": self.accepted, "total": len(parts), "stopped": self.stopped}
        return b'{"results":[' + b",".join(parts) + b"]," + json.dumps(tail).encode()[1:]


async def client_gone(request: Request, gone: asyncio.Event) -> None:
    """Set ``gone`` when the client disconnects (the request's body is read by then)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass
    gone.set()


async def run_batch(
    jobs: Sequence[Any],
    run_job: Callable[[int], Awaitable[tuple[BatchItem, bool]]],
    *,
    width: int,
    stop_on_first_failure: bool,
    request: Request,
    max_answer_bytes: int,
    max_seconds: float,
) -> bytes:
    """Run ``jobs`` (``run_job(i)``: the item of job i and whether it was accepted) with ``width``
    workers, in order when stopping at the first failure; the answer's JSON."""
    answer = BatchAnswer(len(jobs), max_answer_bytes)
    gone = asyncio.Event()
    deadline = time.monotonic() + max_seconds
    next_index = 0
    failures: list[Exception] = []

    async def worker() -> None:
        nonlocal next_index
        while next_index < len(jobs) and answer.stopped is None and not failures:
            if gone.is_set():
                answer.stop("client_gone")
            elif time.monotonic() > deadline:
                answer.stop("deadline")
            else:
                i = next_index
                next_index += 1
                try:
                    item, accepted = await run_job(i)
                except Exception as e:  # the others start no more cases, then the batch raises it
                    failures.append(e)
                    return
                if answer.add(item, accepted) and not accepted and stop_on_first_failure:
                    answer.stop("first_failure")

    watcher = asyncio.create_task(client_gone(request, gone))
    try:
        await asyncio.gather(*(worker() for _ in range(width)))
    finally:
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)
    if failures:  # (answered once every worker has stopped: no run of the batch outlives its answer)
        raise failures[0]
    return answer.body()
