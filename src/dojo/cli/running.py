"""How the command line runs a coroutine to completion."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(coro)``, but the result never becomes the main task's own.

    On Python 3.11, ``asyncio.run`` formats the repr of its main task (its result included) when it
    puts the SIGINT handler back: ``signal.getsignal`` turns the handler it installed, a partial
    holding the task, into an enum and fails, with the value's repr in the message. For a large
    result (an audit of 2,285 tasks) that repr took 8 s after the work was done."""
    box: list[T] = []

    async def main() -> None:
        box.append(await coro)

    asyncio.run(main())
    return box[0]
