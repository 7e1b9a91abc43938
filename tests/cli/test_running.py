"""The command line's coroutine runner: the result comes back, and it is never formatted."""

from __future__ import annotations

import asyncio
import signal

import pytest

from dojo.cli.running import run_async


class Costly:
    """A result whose repr a user would wait for (an audit of thousands of tasks)."""

    reprs = 0

    def __repr__(self) -> str:
        Costly.reprs += 1
        return "Costly()"


async def make() -> Costly:
    await asyncio.sleep(0)
    return Costly()


def test_the_result_comes_back_without_its_repr_being_made() -> None:
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        pytest.skip("asyncio.run only installs its SIGINT handler over Python's default one")
    Costly.reprs = 0
    assert isinstance(asyncio.run(make()), Costly)
    plain = Costly.reprs  # what asyncio.run costs on this Python (3.11: the repr, twice)
    Costly.reprs = 0
    assert isinstance(run_async(make()), Costly)
    assert Costly.reprs == 0, f"run_async formatted its result {Costly.reprs} times (asyncio.run: {plain})"
