"""When a node is drained, recovers or is declared dead (no cluster needed)."""

from __future__ import annotations

import pytest

from dojo.cluster import HealthPolicy, NodeStats
from dojo.cluster.health import NodeHealth
from dojo.errors import InputError


def _stats(inflight: int = 0, slots: int = 4, error_rate: float = 0.0, runs: int = 100) -> NodeStats:
    return NodeStats(node_id="n", hostname="h", pid=1, slots=slots, inflight=inflight, sessions=0, runs=runs,
                     sandbox_errors=0, p50_seconds=0.01, recent_error_rate=error_rate, uptime=1.0)  # fmt: skip


def test_a_slow_probe_drains_and_two_good_ones_recover() -> None:
    h = NodeHealth(HealthPolicy())
    h.observe(_stats(), rtt=2.5, fleet_median_load=0)
    assert h.drained_for is not None and "slow" in h.drained_for
    h.observe(_stats(), rtt=0.01, fleet_median_load=0)
    assert h.drained_for is not None  # one good probe is not enough
    h.observe(_stats(), rtt=0.01, fleet_median_load=0)
    assert h.drained_for is None
    assert h.history[0].startswith("drained: slow") and h.history[1].startswith("recovered")


def test_backed_up_is_relative_to_the_fleet() -> None:
    h = NodeHealth(HealthPolicy())
    h.observe(_stats(inflight=40), rtt=0.01, fleet_median_load=0)  # 10 per slot while the others idle
    assert h.drained_for is not None and "backed up" in h.drained_for
    busy = NodeHealth(HealthPolicy())
    busy.observe(_stats(inflight=40), rtt=0.01, fleet_median_load=9)  # every node is that busy: no drain
    assert busy.drained_for is None


def test_failing_runs_drain_only_with_enough_of_them() -> None:
    h = NodeHealth(HealthPolicy())
    h.observe(_stats(error_rate=0.9, runs=3), rtt=0.01, fleet_median_load=0)
    assert h.drained_for is None
    h.observe(_stats(error_rate=0.9, runs=50), rtt=0.01, fleet_median_load=0)
    assert h.drained_for is not None and "failing" in h.drained_for


def test_dead_after_probes_in_a_row_and_an_answer_resets() -> None:
    h = NodeHealth(HealthPolicy(dead_after=3))
    assert not h.probe_failed() and not h.probe_failed()
    h.observe(_stats(), rtt=0.01, fleet_median_load=0)
    assert not h.probe_failed() and not h.probe_failed() and h.probe_failed()


def test_bad_thresholds_are_refused() -> None:
    with pytest.raises(InputError):
        HealthPolicy(probe_interval=0)
    with pytest.raises(InputError):
        HealthPolicy(dead_after=0)
