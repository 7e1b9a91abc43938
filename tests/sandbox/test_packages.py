"""pip and npm inside a run, through the package proxy only: a real index on loopback upstream."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
import pytest_asyncio

from dojo.sandbox import AsyncSandbox, Limits, Program, Verdict
from dojo.sandbox.packages import PackageProxy
from tests.sandbox.conftest import SKIP_REASON, requires_isolation, root_only
from tests.sandbox.wheelhouse import PackageIndex, make_npm_package, make_wheel

pytestmark = [requires_isolation, root_only]

TOYAPP = "import toydep\n\ndef answer():\n    return toydep.VALUE + 1\n"
LIMITS = Limits(network="packages", wall_time=120, cpu_time=60, memory=1 << 30, processes=128, disk=256 << 20)


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PackageIndex]:
    files = tmp_path_factory.mktemp("index")
    make_wheel(files, "toyapp", "1.0", {"toyapp/__init__.py": TOYAPP}, requires=("toydep",))
    make_wheel(files, "toydep", "1.0", {"toydep/__init__.py": "VALUE = 41\n"})
    make_npm_package(files, "toynpm", "1.0.0", {"index.js": "exports.answer = () => 42;\n"})
    with PackageIndex(files) as served:
        yield served


@pytest_asyncio.fixture(scope="module")
async def proxied(index: PackageIndex, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[AsyncSandbox]:
    if SKIP_REASON:
        pytest.skip(SKIP_REASON)
    proxy = PackageProxy(pypi=index.url, npm=index.npm_url, cache=tmp_path_factory.mktemp("cache"))
    async with AsyncSandbox(pool_size=1, packages=proxy) as sb:
        yield sb


PIP = """python3 -m pip install --no-cache-dir --quiet --target /box/lib toyapp
PYTHONPATH=/box/lib python3 -c 'import toyapp; print("answer", toyapp.answer())'
python3 - <<'PY'
import socket
for host, port in (("pypi.org", 443), ("127.0.0.1", PORT)):
    try:
        socket.create_connection((host, port), timeout=5)
        print("reached", host)
    except OSError as e:
        print("refused", host, type(e).__name__)
PY
"""


async def test_pip_install_in_a_run_goes_through_the_proxy_and_is_cached(
    proxied: AsyncSandbox, index: PackageIndex
) -> None:
    proxy = proxied.packages
    assert proxy is not None
    source = PIP.replace("PORT", str(index.server.server_address[1]))
    first = await proxied.run(Program(language="bash", source=source), LIMITS)
    assert first.verdict is Verdict.ACCEPTED, first.stderr[-2000:]
    lines = first.stdout.splitlines()
    assert "answer 42" in lines
    assert "refused pypi.org gaierror" in lines  # no name resolves but the proxy's
    assert "refused 127.0.0.1 ConnectionRefusedError" in lines  # the upstream index itself is not reachable
    downloads = [r for r in index.requests if r.startswith("/files/")]
    assert len(downloads) == 2 and proxy.misses == 2
    second = await proxied.run(Program(language="bash", source=source), LIMITS)
    assert "answer 42" in second.stdout.splitlines(), second.stderr[-2000:]
    assert [r for r in index.requests if r.startswith("/files/")] == downloads  # both wheels from the cache
    assert proxy.hits == 2 and proxy.misses == 2


NPM = """cd /box && npm install --no-audit --no-fund --loglevel=error toynpm >/dev/null
node -e 'console.log("answer", require("toynpm").answer())'
"""


async def test_npm_install_in_a_run_goes_through_the_proxy(proxied: AsyncSandbox, index: PackageIndex) -> None:
    result = await proxied.run(Program(language="bash", source=NPM), LIMITS)
    assert result.verdict is Verdict.ACCEPTED, result.stderr[-2000:]
    assert result.stdout.strip() == "answer 42"
    assert any(r.startswith("/npm/toynpm") for r in index.requests)


async def test_without_the_packages_policy_pip_reaches_nothing(proxied: AsyncSandbox) -> None:
    source = "python3 -m pip install --no-cache-dir --target /box/lib --retries 0 --timeout 3 toyapp"
    result = await proxied.run(Program(language="bash", source=source), Limits(wall_time=60, cpu_time=30))
    assert result.verdict is Verdict.RUNTIME_ERROR
    assert "No matching distribution" in result.stdout + result.stderr


async def test_the_proxy_fetches_only_what_upstream_listed(index: PackageIndex, tmp_path: Path) -> None:
    proxy = await PackageProxy(pypi=index.url, npm=None, cache=tmp_path).start()
    try:
        async with httpx.AsyncClient(base_url=proxy.url) as client:
            assert (await client.get("/files/" + "0" * 32 + "/evil.whl")).status_code == 404
            assert (await client.get("/simple/..%2f..%2fetc/")).status_code == 404
            assert (await client.post("/simple/toyapp/")).status_code == 405
            assert (await client.get("/npm/toynpm")).status_code == 404  # no npm upstream configured
            page = await client.get("/simple/toyapp/")
            assert page.status_code == 200 and "/files/" in page.text and "127.0.0.1" not in page.text
        await asyncio.sleep(0)
    finally:
        await proxy.close()
