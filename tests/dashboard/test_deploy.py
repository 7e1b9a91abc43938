"""For those who have Prometheus and Grafana: deploy/grafana/dojo.json and deploy/prometheus/dojo-alerts.yml
use only metrics that dojo exports, and the alert rules are the dashboard's own defaults."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml
from prometheus_client import generate_latest

from dojo.dashboard import DEFAULT_RULES, Dashboard, RunLocation
from dojo.service.metrics import ServiceMetrics

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
METRIC = re.compile(r"\b(dojo_[a-z_]+|up)\b")


def exported(tmp_path: Path) -> set[str]:
    """Every metric name a sandbox service's and a dashboard's /metrics carry."""
    service = ServiceMetrics()
    service.runs.labels(verdict="Accepted", language="python").inc()
    service.latency.labels(endpoint="/run").observe(0.01)
    service.rejected.labels(reason="queue").inc()
    service.fleet_nodes.labels(state="ready").set(1)
    for gauge in (service.node_slots, service.node_outstanding, service.node_runs):
        gauge.labels(node="n1", address="10.0.0.5").set(1)
    service.node_state.labels(node="n1", address="10.0.0.5", state="ready").set(1)
    text = generate_latest(service.registry).decode() + Dashboard([RunLocation.parse(str(tmp_path))]).prometheus()
    names = {line.split("{")[0].split(" ")[0] for line in text.splitlines() if line and not line.startswith("#")}
    names |= {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")}  # (a run with no data)
    return names | {"up"}


def test_the_grafana_dashboard_draws_only_exported_metrics(tmp_path: Path) -> None:
    board = json.loads((DEPLOY / "grafana" / "dojo.json").read_text())
    known = exported(tmp_path)
    used = {m for p in board["panels"] for t in p["targets"] for m in METRIC.findall(t["expr"])}
    assert used and used <= known, used - known
    titles = " ".join(p["title"] for p in board["panels"]).lower()
    for view in ("reward", "pass rate", "hack rate", "infrastructure failure", "throughput", "latency", "queue"):
        assert view in titles


def test_the_prometheus_rules_are_the_dashboards_defaults(tmp_path: Path) -> None:
    groups = yaml.safe_load((DEPLOY / "prometheus" / "dojo-alerts.yml").read_text())["groups"]
    rules = {r["alert"]: r for g in groups for r in g["rules"]}
    assert set(rules) == {r.name for r in DEFAULT_RULES}
    known = exported(tmp_path)
    for rule in DEFAULT_RULES:
        mine = rules[rule.name]
        assert set(METRIC.findall(mine["expr"])) <= known, mine["expr"]
        bound = f"> {rule.above:g}" if rule.above is not None else f"< {rule.below:g}"
        if rule.metric == "unreachable":  # Prometheus's own `up` is its inverse: 1 - unreachable
            bound = f"< {1 - (rule.above or 0.0):g}"
        assert bound in " ".join(mine["expr"].split()), (rule.name, mine["expr"])
        assert mine["labels"]["severity"] == rule.severity
