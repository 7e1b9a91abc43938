from __future__ import annotations

import pytest

from dojo.rewards import Grader
from dojo.sandbox import AsyncSandbox


@pytest.fixture
def grader(fast_sandbox: AsyncSandbox) -> Grader:
    return Grader(fast_sandbox)
