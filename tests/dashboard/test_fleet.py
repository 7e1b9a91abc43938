"""A sandbox service as the dashboard sees it: its own Prometheus metrics (``ServiceMetrics``, the
registry ``dojo serve`` exports at /metrics), read twice, give runs/s, latency quantiles and errors."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest
from prometheus_client import generate_latest

from dojo.dashboard import DEFAULT_RULES, AlertEngine
from dojo.dashboard.fleet import ServiceWatch, quantile
from dojo.service.app import create_app
from dojo.service.metrics import ServiceMetrics


def serving(metrics: ServiceMetrics) -> httpx.AsyncClient:
    def answer(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/metrics" and request.headers.get("authorization") == "Bearer t"
        return httpx.Response(200, content=generate_latest(metrics.registry))

    return httpx.AsyncClient(transport=httpx.MockTransport(answer))


async def test_rates_between_two_scrapes() -> None:
    metrics = ServiceMetrics()
    watch = ServiceWatch("http://node-a:8080/", token="t")
    async with serving(metrics) as client:
        await watch.scrape(client)
        assert "runs_per_second" not in watch.figures()  # one scrape: no rate yet
        for _ in range(98):
            metrics.runs.labels(verdict="Accepted", language="python").inc()
            metrics.latency.labels(endpoint="/run").observe(0.004)
        metrics.runs.labels(verdict="SandboxError", language="python").inc(2)
        metrics.latency.labels(endpoint="/run").observe(2.0)
        metrics.latency.labels(endpoint="/run").observe(2.0)
        metrics.queue_depth.set(7)
        metrics.admitted.set(11)
        assert watch.latest is not None
        watch.latest.at -= 10.0  # as if the first scrape were 10 s ago
        await watch.scrape(client)
    figures = watch.figures()
    assert figures["url"] == "http://node-a:8080" and figures["unreachable"] == 0.0
    assert abs(figures["runs_per_second"] - 10.0) < 0.1
    assert figures["error_rate"] == 0.02 and figures["queue_depth"] == 7 and figures["admitted"] == 11
    assert figures["p50_seconds"] == 0.005 and figures["p99_seconds"] == 2.5  # the buckets' upper bounds


async def test_a_node_that_cannot_be_read_is_unreachable_not_an_error_of_the_page() -> None:
    watch = ServiceWatch("http://127.0.0.1:9")
    async with httpx.AsyncClient() as client:
        await watch.scrape(client)
    figures = watch.figures()
    assert figures["unreachable"] == 1.0 and "ConnectError" in figures["error"]


async def test_a_service_that_answers_too_slowly_or_too_much_is_unreachable_within_the_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """httpx's timeout bounds each read: a /metrics that sent a byte every 2 s held the dashboard's
    refresh, and every page request waiting on it, without end; and its body was read at any size."""
    import dojo.dashboard.fleet as fleet

    monkeypatch.setattr(fleet, "SCRAPE_TIMEOUT_S", 0.5)

    async def drip() -> AsyncIterator[bytes]:
        while True:
            yield b"#"
            await asyncio.sleep(0.1)

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.host == "slow":
            return httpx.Response(200, content=drip())
        return httpx.Response(200, content=b"# " + b"x" * (17 << 20))

    slow, big = ServiceWatch("http://slow"), ServiceWatch("http://big")
    async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as client:
        await asyncio.gather(slow.scrape(client), big.scrape(client))
    assert "no whole answer within 0.5 s" in (slow.figures()["error"] or "")
    assert "more than" in (big.figures()["error"] or "") and big.figures()["unreachable"] == 1.0


def test_quantile_of_a_cumulative_histogram() -> None:
    assert quantile({0.1: 50.0, 1.0: 99.0, float("inf"): 100.0}, 0.5) == 0.1
    assert quantile({0.1: 50.0, 1.0: 99.0, float("inf"): 100.0}, 0.99) == 1.0
    assert quantile({}, 0.5) is None and quantile({1.0: 0.0}, 0.5) is None


class FleetDouble:
    """What the gateway's /metrics reads of a ``SandboxFleet``: its slots, reruns and per-node stats."""

    pool_size = 8
    reruns = 1

    def stats(self) -> dict[str, dict[str, object]]:
        return {
            "n1": {"state": "ready", "address": "10.0.0.5", "slots": 4, "outstanding": 9, "sessions": 0, "runs": 120,
                   "drained": None, "reason": None},
            "n2": {"state": "dead", "address": "10.0.0.6", "slots": 4, "outstanding": 0, "sessions": 0, "runs": 30,
                   "drained": None, "reason": "no answer"},
        }  # fmt: skip


async def test_a_fleet_gateway_shows_each_node_and_a_dead_one_alerts() -> None:
    """``dojo serve --ray`` exports its nodes one by one; the dashboard draws a row per node, and the
    default rule flags the dead node (unreachable); more runs in flight than slots is a queue."""
    app = create_app(sandbox=FleetDouble())  # type: ignore[arg-type]
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gateway") as c:
        text = (await c.get("/metrics")).text
    assert 'dojo_fleet_node_state{address="10.0.0.6",node="n2",state="dead"} 1.0' in text
    watch = ServiceWatch("http://gateway")
    async with httpx.AsyncClient(transport=httpx.MockTransport(lambda _: httpx.Response(200, text=text))) as client:
        await watch.scrape(client)
    nodes = {n["node"]: n for n in watch.figures()["nodes"]}
    assert nodes["n1"]["state"] == "ready" and nodes["n1"]["queue_depth"] == 5.0 and nodes["n1"]["slots"] == 4
    assert nodes["n2"]["state"] == "dead" and nodes["n2"]["unreachable"] == 1.0
    engine = AlertEngine([r for r in DEFAULT_RULES if r.metric == "unreachable"])
    engine.evaluate({f"node {n}": {"unreachable": row["unreachable"]} for n, row in nodes.items()}, {})
    assert [a["subject"] for a in engine.state()["firing"]] == ["node n2"]
