"""The screenshots of docs/dashboard.md: a run written as ``dojo train`` writes one (with hacks in
its last groups), served by ``dojo dashboard``, each view captured in Debian's Chromium.

    .venv/bin/python scripts/dashboard_screenshots.py [--out docs/dashboard]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from playwright.async_api import async_playwright

from dojo.rollout.store import TrajectoryStore

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.dashboard.test_browser import CHROMIUM, CHROMIUM_ARGS  # noqa: E402 (after the path)
from tests.dashboard.written_runs import write_groups, write_metrics  # noqa: E402

PORT = 8797


def write_run(run: Path) -> None:
    """60 steps of 4 groups: the pass rate climbs with the steps; the last steps hack."""
    rng = random.Random(0)
    store = TrajectoryStore(str(run / "trajectories"))
    for step in range(60):
        level = rng.choice([0.2, 0.5, 0.8])
        write_groups(store, 4, size=4, pass_every=max(1, 4 - step // 15), difficulty=level, wall=rng.uniform(2, 20))
        if step >= 55:
            write_groups(store, 1, size=4, hack=True, wall=rng.uniform(2, 20))
    write_metrics(run, 60)


async def capture(url: str, out: Path) -> None:
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = await browser.new_page(viewport={"width": 1400, "height": 1000})
        await page.goto(url + "/")
        await page.wait_for_selector("#chart-reward canvas")
        await page.wait_for_timeout(1500)
        await page.screenshot(path=str(out / "curves.png"), full_page=False)
        for tab, ready in (("slowest", "#slow-episodes tr:nth-child(2)"), ("alerts", "#alerts-rules tr:nth-child(2)")):
            await page.goto(f"{url}/#{tab}")
            await page.wait_for_selector(ready)
            await page.screenshot(path=str(out / f"{tab}.png"), full_page=False)
        await page.goto(url + "/#episodes")
        await page.fill("input[name=flag]", "hack:")
        await page.click("#search button")
        await page.wait_for_selector("#found tr:nth-child(2) a")
        await page.screenshot(path=str(out / "episodes.png"), full_page=False)
        await page.click("#found tr:nth-child(2) a")
        await page.wait_for_selector("#episode .tool-call")
        await page.screenshot(path=str(out / "episode.png"), full_page=False)
        await browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "dashboard")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="dojo-screenshots-") as tmp:
        run = Path(tmp) / "demo-run"
        write_run(run)
        server = subprocess.Popen([sys.executable, "-m", "dojo.cli", "dashboard", str(run), "--port", str(PORT)])
        try:
            url = f"http://127.0.0.1:{PORT}"
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                try:
                    if httpx.get(url + "/api/overview", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    time.sleep(0.2)
            asyncio.run(capture(url, args.out))
        finally:
            server.terminate()
            server.wait(timeout=30)
    print(f"screenshots in {args.out}")


if __name__ == "__main__":
    main()
