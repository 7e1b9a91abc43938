"""When a node gets work: ``HealthPolicy`` (the thresholds) and ``NodeHealth`` (one node's record).

A node is *dead* after ``dead_after`` probes in a row fail (no answer within ``probe_timeout``), or
at once when Ray says its actor died. It is *drained* (no new work; what it runs finishes) while it
is slow (a probe takes longer than ``slow_probe``), backed up (runs in it per slot, counting other
callers' runs, above ``backlog_factor`` times the fleet's median plus one) or failing (more than
``max_error_rate`` of its recent runs were sandbox failures); it gets work again after
``recover_probes`` good probes in a row.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dojo.cluster.node import NodeStats
from dojo.errors import InputError


@dataclass(frozen=True)
class HealthPolicy:
    probe_interval: float = 0.5
    probe_timeout: float = 1.5
    dead_after: int = 2
    slow_probe: float = 1.0
    backlog_factor: float = 4.0
    max_error_rate: float = 0.5
    recover_probes: int = 2
    discover_interval: float = 1.0
    max_probes_per_second: float = 500.0  # past 250 nodes, probes slow down rather than cost more

    def __post_init__(self) -> None:
        if min(self.probe_interval, self.probe_timeout, self.discover_interval, self.max_probes_per_second) <= 0:
            raise InputError("health intervals and timeouts must be positive")
        if self.dead_after < 1 or self.recover_probes < 1:
            raise InputError("dead_after and recover_probes must be at least 1")


@dataclass
class NodeHealth:
    policy: HealthPolicy
    failed_probes: int = 0
    good_probes: int = 0
    drained_for: str | None = None  # why the node gets no new work, while it is drained
    last: NodeStats | None = None
    last_rtt: float = 0.0
    history: list[str] = field(default_factory=list)  # drain / recover events, for the tests and the log

    def probe_failed(self) -> bool:
        """Record a probe with no answer; True when the node is to be declared dead."""
        self.failed_probes += 1
        self.good_probes = 0
        return self.failed_probes >= self.policy.dead_after

    def observe(self, stats: NodeStats, rtt: float, fleet_median_load: float) -> None:
        """Record a probe's answer and decide whether the node is drained."""
        self.failed_probes = 0
        self.last, self.last_rtt = stats, rtt
        reason = self.trouble(stats, rtt, fleet_median_load)
        if reason is not None:
            self.good_probes = 0
            if self.drained_for is None:
                self.history.append(f"drained: {reason}")
            self.drained_for = reason
            return
        self.good_probes += 1
        if self.drained_for is not None and self.good_probes >= self.policy.recover_probes:
            self.history.append(f"recovered after: {self.drained_for}")
            self.drained_for = None

    def trouble(self, stats: NodeStats, rtt: float, fleet_median_load: float) -> str | None:
        p = self.policy
        if rtt > p.slow_probe:
            return f"slow: a probe took {rtt:.2f}s (more than {p.slow_probe}s)"
        if load_per_slot(stats) > p.backlog_factor * (fleet_median_load + 1):
            return (
                f"backed up: {stats.inflight} runs on {stats.slots} slots (fleet median {fleet_median_load:.1f}/slot)"
            )
        if stats.recent_error_rate > p.max_error_rate and stats.runs >= 8:
            return f"failing: {stats.recent_error_rate:.0%} of its recent runs were sandbox failures"
        return None


def load_per_slot(stats: NodeStats) -> float:
    return stats.inflight / max(1, stats.slots)
