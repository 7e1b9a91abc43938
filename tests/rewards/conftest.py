from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from dojo.rewards import Grader
from dojo.sandbox import AsyncSandbox
from tests.sandbox.conftest import SKIP_REASON


@pytest_asyncio.fixture(scope="session")
async def grading_sandbox() -> AsyncIterator[AsyncSandbox]:
    if SKIP_REASON:
        pytest.skip(SKIP_REASON)
    async with AsyncSandbox(pool_size=4) as sb:
        yield sb


@pytest.fixture
def grader(grading_sandbox: AsyncSandbox) -> Grader:
    return Grader(grading_sandbox)
