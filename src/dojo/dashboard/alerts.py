"""Alert rules: thresholds on what the dashboard computes, shown on the page, logged, and posted to a
webhook when they start and stop firing.

A rule watches one metric of every run (over its last ``window_groups`` groups) or of every
sandbox node (its latest scrape), and fires while the value is ``above`` (or ``below``) its
threshold. ``DEFAULT_RULES`` are on unless a rule file replaces them (``dojo dashboard --rules
FILE``, YAML: ``rules: [...]`` and optionally ``webhook: URL``); docs/dashboard.md lists them and
deploy/prometheus/dojo-alerts.yml holds the same rules for Prometheus.
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import Any, Literal

import httpx
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from dojo.dashboard.bounded_http import bounded_request
from dojo.errors import InputError, field_problems
from dojo.user_files import read_user_text

log = logging.getLogger("dojo.dashboard")

RUN_METRICS = ("hack_rate", "infra_failure_rate", "pass_rate", "reward", "throughput", "throughput_drop",
               "judge_agreement")  # fmt: skip
NODE_METRICS = ("queue_depth", "error_rate", "unreachable", "p99_seconds")
WEBHOOK_TIMEOUT_S = 5.0


class AlertRule(BaseModel):
    """One threshold on one metric."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="What the page and the log call the alert.")
    metric: Literal[
        "hack_rate", "infra_failure_rate", "pass_rate", "reward", "throughput", "throughput_drop", "judge_agreement",
        "queue_depth", "error_rate", "unreachable", "p99_seconds",
    ] = Field(description="Run metrics over the last window_groups groups: hack_rate, infra_failure_rate, pass_rate, "
              "reward, throughput (episodes/s), throughput_drop (1 - throughput / the run's overall), judge_agreement "
              "(metrics.csv's judge/agreement). Node metrics, per sandbox service: queue_depth, error_rate "
              "(SandboxError runs and refusals per run), unreachable (1 when /metrics cannot be read), "
              "p99_seconds.")  # fmt: skip
    above: float | None = Field(None, description="Fires while the value is above this.")
    below: float | None = Field(None, description="Fires while the value is below this.")
    window_groups: int = Field(20, ge=1, description="Run metrics: how many of the latest groups.")
    min_groups: int = Field(5, ge=1, description="Run metrics: no verdict before the run has this many groups.")
    severity: Literal["warning", "critical"] = "warning"

    @model_validator(mode="after")
    def _one_bound(self) -> AlertRule:
        if (self.above is None) == (self.below is None):
            raise ValueError(f"rule {self.name!r}: give exactly one of above or below")
        return self

    @property
    def on_nodes(self) -> bool:
        return self.metric in NODE_METRICS

    def fires(self, value: float | None) -> bool:
        if value is None:
            return False
        return value > self.above if self.above is not None else value < (self.below or 0.0)

    def describe(self, value: float) -> str:
        bound = f"above {self.above:g}" if self.above is not None else f"below {self.below:g}"
        return f"{self.metric} {value:.3g} is {bound}"


DEFAULT_RULES = [
    AlertRule(name="reward hacking", metric="hack_rate", above=0.05, window_groups=20, severity="critical"),
    AlertRule(name="infrastructure failures", metric="infra_failure_rate", above=0.05, window_groups=20),
    AlertRule(name="throughput dropped", metric="throughput_drop", above=0.5, window_groups=20),
    AlertRule(name="judge disagrees with people", metric="judge_agreement", below=0.75),
    AlertRule(name="sandbox node backed up", metric="queue_depth", above=32),
    AlertRule(name="sandbox node failing", metric="error_rate", above=0.05, severity="critical"),
    AlertRule(name="sandbox node unreachable", metric="unreachable", above=0.5, severity="critical"),
]


class RuleFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rules: list[AlertRule]
    webhook: str | None = Field(None, description="POSTed a JSON object each time an alert starts or stops.")


def load_rules(path: Path) -> RuleFile:
    """A rule file; an InputError that names the file and what is wrong in it."""
    try:
        raw = yaml.safe_load(read_user_text(path, "the rule file"))
    except yaml.YAMLError as e:
        raise InputError(f"{path} is not YAML: {e}") from e
    try:
        return RuleFile.model_validate(raw if raw is not None else {})
    except ValidationError as e:
        problems = "; ".join(field_problems(e))
        raise InputError(f"{path}: {problems} (see docs/dashboard.md for the rule format)") from e


class Alert(BaseModel):
    """A rule firing on one subject (a run or a node)."""

    rule: str
    metric: str
    severity: str
    subject: str
    value: float
    message: str
    since: float


class AlertEngine:
    """Evaluates the rules on each refresh; remembers what fires, and says (log, webhook) when an
    alert starts and when it stops."""

    def __init__(self, rules: list[AlertRule], webhook: str | None = None) -> None:
        self.rules = rules
        self.webhook = webhook
        self.firing: dict[tuple[str, str], Alert] = {}
        self.history: list[dict[str, Any]] = []  # transitions, the latest last (at most 200)
        self.webhook_errors = 0

    def evaluate(self, values: dict[str, dict[str, float | None]], groups: dict[str, float]) -> list[dict[str, Any]]:
        """``values``: subject -> metric -> value (runs and nodes alike); ``groups``: how many groups
        each run has so far. The transitions this evaluation made (also logged and kept)."""
        now = time.time()
        transitions: list[dict[str, Any]] = []
        for rule in self.rules:
            for subject, metrics in values.items():
                if rule.metric not in metrics:
                    continue
                value = metrics[rule.metric]
                if not rule.on_nodes and groups.get(subject, 0.0) < rule.min_groups:
                    value = None
                key = (rule.name, subject)
                if rule.fires(value):
                    assert value is not None
                    if key not in self.firing:
                        alert = Alert(rule=rule.name, metric=rule.metric, severity=rule.severity, subject=subject,
                                      value=value, message=f"{subject}: {rule.describe(value)}", since=now)  # fmt: skip
                        self.firing[key] = alert
                        transitions.append({"state": "firing", **alert.model_dump()})
                        log.warning("alert %s (%s): %s", rule.name, rule.severity, alert.message)
                    else:
                        self.firing[key].value = value
                elif key in self.firing and value is not None:
                    alert = self.firing.pop(key)
                    transitions.append({"state": "resolved", **alert.model_dump(), "value": value})
                    log.warning("alert %s resolved: %s", rule.name, subject)
        self.history = (self.history + transitions)[-200:]
        return transitions

    def post(self, transitions: list[dict[str, Any]]) -> None:
        """Each transition to the webhook (one POST each, bounded by WEBHOOK_TIMEOUT_S); a failure is
        logged and counted, never raised: the dashboard goes on."""
        if self.webhook and transitions:
            asyncio.run(self._post(self.webhook, transitions))

    async def _post(self, webhook: str, transitions: list[dict[str, Any]]) -> None:
        async with httpx.AsyncClient() as client:
            for event in transitions:
                try:
                    status, _ = await bounded_request(
                        client, "POST", webhook, seconds=WEBHOOK_TIMEOUT_S, max_bytes=1 << 16, json=event
                    )
                    if status >= 400:
                        raise ValueError(f"it answered {status}")
                except (httpx.HTTPError, ValueError) as e:
                    self.webhook_errors += 1
                    log.warning("alert webhook %s failed: %s", webhook, e)

    def state(self) -> dict[str, Any]:
        return {
            "firing": [a.model_dump() for a in sorted(self.firing.values(), key=lambda a: a.since)],
            "history": self.history[-50:],
            "rules": [r.model_dump() for r in self.rules],
            "webhook_errors": self.webhook_errors,
        }
