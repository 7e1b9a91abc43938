from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from dojo.sandbox import AsyncSandbox
from tests.sandbox.conftest import SKIP_REASON


@pytest_asyncio.fixture(scope="session")
async def fast_sandbox() -> AsyncIterator[AsyncSandbox]:
    """One warm pool (fast isolation) shared by the tests that just need to run code."""
    if SKIP_REASON:
        pytest.skip(SKIP_REASON)
    async with AsyncSandbox(pool_size=4) as sb:
        yield sb
