"""The dashboard's HTTP API and command line: what the page reads, the token off loopback, and bad
input that gets a clear error."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import httpx
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from dojo.cli import app as cli
from dojo.dashboard import Dashboard, RunLocation, create_dashboard_app
from dojo.rollout.store import TrajectoryStore
from tests.dashboard.written_runs import write_groups, write_metrics


@pytest.fixture
def store(tmp_path: Path) -> Path:
    write_groups(TrajectoryStore(str(tmp_path / "s")), 6, size=2, pass_every=1)
    return tmp_path / "s"


def client(store: Path, token: str | None = None) -> httpx.AsyncClient:
    board = Dashboard([RunLocation.parse(f"mine={store}")])
    transport = httpx.ASGITransport(app=create_dashboard_app(board, token))
    return httpx.AsyncClient(transport=transport, base_url="http://dashboard")


async def test_the_api_serves_the_page_and_the_runs_figures(store: Path) -> None:
    async with client(store) as c:
        page = await c.get("/")
        assert page.status_code == 200 and "dashboard.js" in page.text
        assert (await c.get("/static/vendor/uPlot.iife.min.js")).status_code == 200
        overview = (await c.get("/api/overview")).json()
        assert overview["runs"][0]["name"] == "mine" and overview["runs"][0]["episodes"] == 12
        assert overview["runs"][0]["pass_rate"] == 1.0
        curves = (await c.get("/api/runs/0/curves")).json()
        assert curves["by_episode"]["x"][-1] == 12
        found = (await c.get("/api/runs/0/episodes", params={"verdict": "pass", "limit": 3})).json()
        assert len(found) == 3
        one = (await c.get(f"/api/runs/0/episodes/{found[0]['episode_id']}")).json()
        assert one["episode_id"] == found[0]["episode_id"] and one["turns"][0]["tool_results"]
        text = (await c.get("/metrics")).text
        assert 'dojo_run_episodes{run="mine"} 12' in text and "dojo_dashboard_alerts_firing 0" in text


async def test_bad_requests_say_what_is_wrong(store: Path) -> None:
    async with client(store) as c:
        missing = await c.get("/api/runs/3/curves")
        assert missing.status_code == 404 and "runs 0 to 0" in missing.json()["detail"]
        gone = await c.get("/api/runs/0/episodes/nope")
        assert gone.status_code == 404 and "no episode 'nope'" in gone.json()["detail"]
        too_many = await c.get("/api/runs/0/episodes", params={"limit": 5000})
        assert too_many.status_code == 422


async def test_a_token_guards_every_request(store: Path) -> None:
    async with client(store, token="s3cret") as c:
        refused = await c.get("/api/overview")
        assert refused.status_code == 401 and "?token=" in refused.json()["error"]
        assert (await c.get("/api/overview", headers={"Authorization": "Bearer s3cret"})).status_code == 200
        assert (await c.get("/", params={"token": "s3cret"})).status_code == 200
        assert (await c.get("/", params={"token": "wrong"})).status_code == 401


def test_the_command_line_refuses_what_it_cannot_serve(tmp_path: Path) -> None:
    runner = CliRunner()
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "a.txt").write_text("x")
    later = str(tmp_path / "run")  # a run about to start: fine in itself
    cases = {
        ("--host", "0.0.0.0", later): "without a token",
        ("--service", "node-a:8080", later): "give the service's URL",
        ("--webhook", "ftp://x", later): "give an http(s) URL",
        (str(tmp_path / "junk"),): "neither a run directory",
        ("--rules", str(tmp_path / "none.yaml"), later): "the rule file",
        ("--rules", str(tmp_path), later): "is a directory",
    }
    for args, message in cases.items():
        result = runner.invoke(cli, ["dashboard", *args])
        assert result.exit_code == 2, (args, result.output)
        assert message in " ".join(result.output.split()), (args, result.output)


async def test_an_episode_whose_id_holds_a_slash_opens(tmp_path: Path) -> None:
    """Episode ids are ``{group_id}#{i}``, and ``dojo train``'s group ids ``step000001/{task id}``:
    the route had no path converter, so every training episode's view was a 404."""
    store = TrajectoryStore(str(tmp_path / "s"))
    write_groups(store, 1, size=1)
    table = pq.read_table(store.shards()[0])
    odd = "step000001/HumanEval/0#0"
    ids = pa.array([odd], pa.string())
    pq.write_table(table.set_column(table.schema.get_field_index("episode_id"), "episode_id", ids), store.shards()[0])
    async with client(tmp_path / "s") as c:
        found = (await c.get("/api/runs/0/episodes")).json()
        assert [e["episode_id"] for e in found] == [odd]
        one = await c.get(f"/api/runs/0/episodes/{quote(odd, safe='')}")
        assert one.status_code == 200 and one.json()["episode_id"] == odd, one.text


def test_a_metrics_file_that_cannot_be_read_is_its_runs_error_not_the_dashboards(tmp_path: Path) -> None:
    """One byte that is not UTF-8 in one run's metrics.csv made every refresh raise: every API call
    was a 500 and the server's background refresh ended for good (no alert evaluated after it)."""
    for name in ("good", "bad"):
        (tmp_path / name).mkdir()
        write_metrics(tmp_path / name, 2)
    with (tmp_path / "bad" / "metrics.csv").open("ab") as f:
        f.write(b"\xff\xfe,1\n")
    board = Dashboard([RunLocation.parse(str(tmp_path / "good")), RunLocation.parse(str(tmp_path / "bad"))])
    board.refresh()
    good, bad = board.overview()["runs"]
    assert good["error"] is None and good["training_steps"] == 2
    assert "metrics.csv" in (bad["error"] or ""), bad


def test_served_without_a_token_only_loopback_names_are_answered() -> None:
    """DNS rebinding: a page elsewhere points its own name at 127.0.0.1 and reads the local server as
    same-origin; its requests name that page's host. Every dojo server without a token is wrapped so
    (``dojo.service.loopback.guarded``)."""
    import asyncio

    from dojo.service.loopback import guarded, host_of, is_loopback

    async def app(scope: dict, receive: object, send: object) -> None:  # type: ignore[type-arg]
        await send({"type": "http.response.start", "status": 200, "headers": []})  # type: ignore[operator]
        await send({"type": "http.response.body", "body": b"ok"})  # type: ignore[operator]

    async def status(wrapped: object, host: str) -> int:
        transport = httpx.ASGITransport(app=wrapped)  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=transport, base_url=f"http://{host}") as c:
            return (await c.get("/")).status_code

    guard = guarded(app, None, "127.0.0.1")
    for host in ("127.0.0.1:8080", "localhost:9", "[::1]:80", "localhost", "127.0.0.2"):
        assert asyncio.run(status(guard, host)) == 200, host
    for host in ("attacker.example:8080", "attacker.example", "10.0.0.5", "127.0.0.1.attacker.example",
                 "evil.localhost"):  # fmt: skip
        assert asyncio.run(status(guard, host)) == 400, host
    assert asyncio.run(status(guarded(app, "t", "127.0.0.1"), "attacker.example")) == 200  # (the token guards it)
    assert asyncio.run(status(guarded(app, None, "0.0.0.0"), "attacker.example")) == 200  # (open, as its command says)
    assert not is_loopback("localhost.attacker.example") and is_loopback("::1")
    assert host_of("localhost:80.evil") is None and host_of("[::1]evil.example") is None  # (no browser sends these)


def test_the_dashboard_command_serves_its_app_behind_the_loopback_guard(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The guard is the command's to put on (``guarded``): without a token on loopback the app uvicorn
    is given answers loopback names only; with a token, the token guards it."""
    import uvicorn

    from dojo.service.loopback import LoopbackHostsOnly
    from tests.conftest import free_port

    runner = CliRunner()
    served: list[object] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **_: served.append(app))
    for env in ({"DOJO_TOKEN": ""}, {"DOJO_TOKEN": "t0ken"}):
        result = runner.invoke(cli, ["dashboard", str(tmp_path / "later"), "--port", str(free_port())], env=env)
        assert result.exit_code == 0, result.output
    assert isinstance(served[0], LoopbackHostsOnly) and not isinstance(served[1], LoopbackHostsOnly)
