"""``to_the_end``: await clean-up work that a cancellation must not cut short.

``asyncio.shield`` alone keeps the work going when its caller is cancelled, but the caller returns at
once, so the caller's own caller goes on (a test's teardown, a server's shutdown) while the slots are
still being stopped, and any error of the work is never seen. Here the caller waits for the work to
end, however often it is cancelled meanwhile, and only then raises the cancellation it got.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


async def to_the_end(work: Awaitable[T]) -> T:
    """The result of ``work``, awaited to its end even if the caller is cancelled meanwhile (the
    cancellation is raised afterwards)."""
    task = asyncio.ensure_future(work)
    cancelled = False
    while True:
        try:
            result = await asyncio.shield(task)
        except asyncio.CancelledError:
            if task.done():  # the work itself was cancelled (by the loop closing): nothing to wait for
                raise
            cancelled = True
            continue
        if cancelled:
            raise asyncio.CancelledError
        return result
