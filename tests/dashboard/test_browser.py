"""The dashboard in a real browser: headless Chromium (Debian's package, /usr/bin/chromium) driven by
Playwright, against ``dojo dashboard`` serving a run that the test writes while the page is open."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from dojo.rollout.store import TrajectoryStore
from tests.conftest import serve_in_subprocess, stop_subprocess
from tests.dashboard.written_runs import write_groups, write_metrics

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# As the machine's probe starts it: as root, and nothing that reaches for the network.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]  # fmt: skip
LIVE_S = 10_000  # ms: a new point must reach the page within the server's refresh plus the page's poll

playwright_api = pytest.importorskip("playwright.async_api", reason="pip install playwright (make test does)")
pytestmark = pytest.mark.skipif(
    not os.access(CHROMIUM, os.X_OK), reason="no Chromium: make test installs Debian's chromium (as root)"
)


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    """A training run's directory: 12 groups of 4 (half pass), and 6 steps of metrics."""
    run = tmp_path / "run"
    run.mkdir()
    write_groups(TrajectoryStore(str(run / "trajectories")), 12, size=4, pass_every=2)
    write_metrics(run, 6)
    return run


@pytest.fixture
def dashboard_url(run_dir: Path, tmp_path: Path) -> Iterator[str]:
    proc, url = serve_in_subprocess(str(run_dir), command="dashboard", health="/api/overview", timeout=60)
    try:
        yield url
    finally:
        stop_subprocess(proc)


@pytest_asyncio.fixture
async def page(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Any]:
    # Playwright's and Chromium's scratch files in a directory of the test's own, with a short path:
    # Chromium's singleton socket lives there (a socket's path is at most 107 bytes; a worker's
    # tmp_path is longer)
    scratch = tempfile.mkdtemp(prefix="pw-")
    monkeypatch.setenv("TMPDIR", scratch)
    try:
        async with playwright_api.async_playwright() as p:
            browser = await p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                context = await browser.new_context(viewport={"width": 1300, "height": 900})
                yield await context.new_page()
            finally:
                await browser.close()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


async def points(page: Any, chart: str) -> int:
    return int(await page.get_attribute(f"#chart-{chart}", "data-points") or 0)


async def test_the_curves_have_the_runs_points(page: Any, dashboard_url: str) -> None:
    await page.goto(dashboard_url + "/")
    await page.wait_for_selector("#chart-reward canvas")
    # 48 episodes in windows of 2 (MIN_WINDOW pools a run of 20 windows or more): 24 points; 6 steps
    assert await points(page, "reward") == 24
    assert await points(page, "pass_rate") == 24
    assert await points(page, "step_reward") == 6
    assert "48 episodes" in await page.inner_text("#status")
    assert "pass 0.5" in await page.inner_text("#runs")


async def test_the_viewer_shows_an_episodes_tool_calls_and_flags(page: Any, dashboard_url: str, run_dir: Path) -> None:
    write_groups(TrajectoryStore(str(run_dir / "trajectories")), 1, size=2, hack=True, wall=40.0)
    await page.goto(dashboard_url + "/#episodes")
    await page.fill("input[name=flag]", "hack:")
    await page.click("#search button")
    await page.wait_for_function("document.querySelectorAll('#found tr').length === 3")  # header + 2 hacked
    await page.click("#found tr:nth-child(2) a")
    await page.wait_for_selector("#episode .tool-call")
    assert await page.inner_text("#episode .tool-call .tool-name") == "run_code"
    assert "print(f(1))" in await page.inner_text("#episode .tool-call")
    assert await page.inner_text("#episode-flags .flag.hack") == "hack:exit_before_checks"
    assert "exited before the checks" in await page.inner_text("#episode .case.failed")
    # and the slowest list links to the same kind of episode
    await page.goto(dashboard_url + "/#slowest")
    await page.wait_for_selector("#slow-episodes tr:nth-child(2) a")
    first = await page.inner_text("#slow-episodes tr:nth-child(2)")
    assert first.startswith("40.0")


async def test_an_alert_appears_when_a_rule_fires(page: Any, dashboard_url: str, run_dir: Path) -> None:
    await page.goto(dashboard_url + "/")
    await page.wait_for_selector("#chart-reward canvas")
    assert await page.locator("#firing .alert").count() == 0
    write_groups(TrajectoryStore(str(run_dir / "trajectories")), 3, size=4, hack=True)  # 3 of the last 15 groups
    alert = page.locator('#firing .alert[data-rule="reward hacking"]')
    await alert.wait_for(timeout=LIVE_S)
    assert "hack_rate" in await alert.inner_text()
    await page.goto(dashboard_url + "/#alerts")
    await page.wait_for_selector("#alerts-firing tr:nth-child(2)")
    assert "reward hacking" in await page.inner_text("#alerts-firing")


async def test_the_page_keeps_up_while_the_run_writes(page: Any, dashboard_url: str, run_dir: Path) -> None:
    await page.goto(dashboard_url + "/")
    await page.wait_for_selector("#chart-reward canvas")
    store = TrajectoryStore(str(run_dir / "trajectories"))
    for more in (1, 2):
        write_groups(store, 12, size=4)  # 48 episodes more
        write_metrics(run_dir, 2)
        await page.wait_for_function(
            f"document.querySelector('#chart-reward').dataset.last === '{48 * (1 + more)}'", timeout=LIVE_S
        )
        await page.wait_for_function(
            f"document.querySelector('#chart-step_reward').dataset.points === '{6 + 2 * more}'", timeout=LIVE_S
        )
