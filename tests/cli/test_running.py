"""The command line's coroutine runner: the result comes back, and it is never formatted."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Iterator

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


@pytest.fixture
def pythons_sigint_handler() -> Iterator[None]:
    """As in a command run from a shell: asyncio.run installs its own SIGINT handler only over Python's."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


def test_the_result_comes_back_without_its_repr_being_made(pythons_sigint_handler: None) -> None:
    Costly.reprs = 0
    assert isinstance(asyncio.run(make()), Costly)
    plain = Costly.reprs  # what asyncio.run costs on this Python (3.11: the repr, twice)
    Costly.reprs = 0
    assert isinstance(run_async(make()), Costly)
    assert Costly.reprs == 0, f"run_async formatted its result {Costly.reprs} times (asyncio.run: {plain})"
