from __future__ import annotations

import os
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from dojo.sandbox import AsyncSandbox, IsolationUnavailable, preflight

MODE: str | None
try:
    MODE = preflight()
    SKIP_REASON = ""
except IsolationUnavailable as e:  # pragma: no cover - CI runs as root
    MODE = None
    SKIP_REASON = str(e)

requires_isolation = pytest.mark.skipif(bool(SKIP_REASON), reason=SKIP_REASON)


def _sandbox_has_pytest() -> bool:
    import subprocess

    from dojo.sandbox.languages import default_python

    try:
        return (
            subprocess.run([default_python(), "-c", "import pytest"], capture_output=True, timeout=30).returncode == 0
        )
    except (OSError, subprocess.TimeoutExpired):
        return False


# repo tasks run a package's tests with the sandbox interpreter's pytest (Debian's python3-pytest,
# which `make toolchains` installs)
requires_sandbox_pytest = pytest.mark.skipif(
    not _sandbox_has_pytest(), reason="the sandbox's python3 has no pytest: make toolchains (python3-pytest)"
)
# Tests of what only root mode offers (cgroups, the host network); test_rootless.py runs this
# whole directory again as an unprivileged user, where these are skipped.
root_only = pytest.mark.skipif(MODE == "rootless", reason="root mode only (cgroups, host network)")
rootless_only = pytest.mark.skipif(MODE != "rootless", reason="rootless mode only")


@pytest_asyncio.fixture(scope="session", params=["fast", "strict"])
async def sandbox(request: pytest.FixtureRequest) -> AsyncIterator[AsyncSandbox]:
    """Both isolation levels must pass the same tests."""
    if SKIP_REASON:
        pytest.skip(SKIP_REASON)
    async with AsyncSandbox(pool_size=4, isolation=request.param) as sb:
        yield sb


@pytest_asyncio.fixture
async def one_slot() -> AsyncIterator[AsyncSandbox]:
    """A single slot, so consecutive runs land on the same zygote (for leakage tests)."""
    if SKIP_REASON:
        pytest.skip(SKIP_REASON)
    async with AsyncSandbox(pool_size=1) as sb:
        yield sb


@pytest_asyncio.fixture
async def spare_slot() -> AsyncIterator[AsyncSandbox]:
    """A single slot that forks each run's process while idle (``AsyncSandbox(spare=True)``)."""
    if SKIP_REASON:
        pytest.skip(SKIP_REASON)
    async with AsyncSandbox(pool_size=1, spare=True) as sb:
        yield sb


@pytest_asyncio.fixture(params=[False, True], ids=["fork", "spare"])
async def either_slot(request: pytest.FixtureRequest) -> AsyncIterator[AsyncSandbox]:
    """One slot, each run's process forked on request, then one with a spare (both must pass)."""
    if SKIP_REASON:
        pytest.skip(SKIP_REASON)
    async with AsyncSandbox(pool_size=1, spare=request.param) as sb:
        yield sb


def host_processes() -> set[int]:
    return {int(p) for p in os.listdir("/proc") if p.isdigit()}
