"""The sandbox services a run uses, as the dashboard sees them: each ``dojo serve`` (a node, or the
front of a Ray fleet) scraped at ``/metrics`` (Prometheus text), and rates computed between two
scrapes: runs/s, p50/p99 request latency, errors (SandboxError runs and 429 refusals per run).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from dojo.dashboard.bounded_http import bounded_request

SCRAPE_TIMEOUT_S = 3.0
RUN_ENDPOINTS = ("/run", "/run_code")  # the latency histogram's endpoints that run programs


@dataclass
class Scrape:
    at: float
    runs: float = 0.0
    errors: float = 0.0  # SandboxError runs and refusals
    buckets: dict[float, float] = field(default_factory=dict)  # le -> cumulative count, run endpoints
    gauges: dict[str, float] = field(default_factory=dict)
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)  # a fleet's nodes, by node id


def parse_metrics(text: str, at: float) -> Scrape:
    """The figures the dashboard shows, from a service's ``/metrics`` text."""
    scrape = Scrape(at=at)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            name, labels, value = sample.name, sample.labels, float(sample.value)
            if name == "dojo_runs_total":
                scrape.runs += value
                if labels.get("verdict") == "SandboxError":
                    scrape.errors += value
            elif name == "dojo_rejected_total":
                scrape.errors += value
            elif name == "dojo_request_seconds_bucket" and labels.get("endpoint") in RUN_ENDPOINTS:
                le = float(labels["le"])
                scrape.buckets[le] = scrape.buckets.get(le, 0.0) + value
            elif name in ("dojo_queue_depth", "dojo_admitted", "dojo_live_sessions", "dojo_slot_restarts",
                          "dojo_fleet_slots", "dojo_fleet_reruns"):  # fmt: skip
                scrape.gauges[name.removeprefix("dojo_")] = value
            elif name == "dojo_fleet_nodes":
                scrape.gauges[f"fleet_nodes_{labels.get('state', '')}"] = value
            elif name.startswith("dojo_fleet_node_") and "node" in labels:
                fresh = {"node": labels["node"], "address": labels.get("address")}
                node = scrape.nodes.setdefault(labels["node"], fresh)
                if name == "dojo_fleet_node_state":
                    if value >= 1.0:
                        node["state"] = labels.get("state")
                else:
                    node[name.removeprefix("dojo_fleet_node_")] = value
    return scrape


def quantile(buckets: dict[float, float], q: float) -> float | None:
    """The ``q`` quantile of a cumulative histogram (upper bound of the bucket that holds it)."""
    if not buckets:
        return None
    ordered = sorted(buckets.items())
    total = ordered[-1][1]
    if total <= 0:
        return None
    for le, count in ordered:
        if count >= q * total:
            return le
    return ordered[-1][0]


class ServiceWatch:
    """One sandbox service: its last two scrapes, and the figures between them."""

    def __init__(self, url: str, token: str | None = None) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.previous: Scrape | None = None
        self.latest: Scrape | None = None
        self.error: str | None = None

    async def scrape(self, client: httpx.AsyncClient) -> None:
        """Read the service's ``/metrics`` once (within ``SCRAPE_TIMEOUT_S`` in all); an answer that
        is not one is this service's ``error`` (unreachable), never the dashboard's."""
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        url = f"{self.url}/metrics"
        try:
            status, body = await bounded_request(client, "GET", url, seconds=SCRAPE_TIMEOUT_S, headers=headers)
            if status != 200:
                raise ValueError(f"GET {url} answered {status}")
            scrape = parse_metrics(body.decode("utf-8", errors="replace"), time.time())
        except (httpx.HTTPError, ValueError) as e:
            self.error = f"{type(e).__name__}: {e}"
            return
        self.error = None
        self.previous, self.latest = self.latest, scrape

    def figures(self) -> dict[str, Any]:
        latest, previous = self.latest, self.previous
        out: dict[str, Any] = {"url": self.url, "error": self.error, "unreachable": 1.0 if self.error else 0.0}
        if latest is None:
            return out
        out.update(latest.gauges)
        out["runs_total"] = latest.runs
        out["nodes"] = [self._node(node, latest, previous) for node in latest.nodes.values()]
        if previous is not None and latest.at > previous.at:
            runs = latest.runs - previous.runs
            out["runs_per_second"] = runs / (latest.at - previous.at)
            out["error_rate"] = (latest.errors - previous.errors) / runs if runs > 0 else 0.0
            window = {le: latest.buckets.get(le, 0.0) - previous.buckets.get(le, 0.0) for le in latest.buckets}
            out["p50_seconds"] = quantile(window, 0.5)
            out["p99_seconds"] = quantile(window, 0.99)
        return out

    @staticmethod
    def _node(node: dict[str, Any], latest: Scrape, previous: Scrape | None) -> dict[str, Any]:
        """One fleet node's row: its gauges, runs/s since the previous scrape, and the figures the
        alert rules look at (``unreachable`` when the fleet holds it dead or unusable)."""
        row = dict(node)
        row["unreachable"] = 1.0 if node.get("state") in ("dead", "unusable") else 0.0
        row["queue_depth"] = max(0.0, float(node.get("outstanding", 0.0)) - float(node.get("slots", 0.0)))
        before = previous.nodes.get(node["node"]) if previous is not None else None
        if before is not None and previous is not None and latest.at > previous.at:
            runs = float(node.get("runs", 0.0)) - float(before.get("runs", 0.0))
            row["runs_per_second"] = runs / (latest.at - previous.at)
        return row


async def scrape_all(watches: list[ServiceWatch]) -> None:
    """Every service's ``/metrics`` at once: the refresh waits for the slowest, ``SCRAPE_TIMEOUT_S``
    at most (one after the other, N silent nodes had held it N times that)."""
    async with httpx.AsyncClient() as client:
        await asyncio.gather(*(watch.scrape(client) for watch in watches))
