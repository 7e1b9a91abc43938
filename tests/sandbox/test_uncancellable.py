"""Clean-up that a cancellation must not cut short: the caller waits for it, then is cancelled."""

from __future__ import annotations

import asyncio

import pytest

from dojo.sandbox.uncancellable import to_the_end


async def test_a_cancelled_caller_waits_for_the_work_then_raises_the_cancellation() -> None:
    finished: list[str] = []

    async def clean_up() -> str:
        await asyncio.sleep(0.1)
        finished.append("slots stopped")
        return "done"

    caller = asyncio.ensure_future(to_the_end(clean_up()))
    await asyncio.sleep(0.01)
    caller.cancel()
    await asyncio.sleep(0.01)
    caller.cancel()  # twice: still waits
    with pytest.raises(asyncio.CancelledError):
        await caller
    assert finished == ["slots stopped"]  # the caller did not return before the work ended
    assert await to_the_end(clean_up()) == "done"


async def test_an_error_of_the_work_reaches_the_caller() -> None:
    async def fails() -> None:
        raise OSError("no such slot")

    with pytest.raises(OSError, match="no such slot"):
        await to_the_end(fails())
