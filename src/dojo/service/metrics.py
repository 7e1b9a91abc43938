"""Prometheus metrics of the service, on a registry of its own (several apps per process in tests)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


class ServiceMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.runs = Counter(
            "dojo_runs", "Programs run, by verdict and language", ["verdict", "language"], registry=self.registry
        )
        self.latency = Histogram(
            "dojo_request_seconds", "Request latency by endpoint", ["endpoint"],
            buckets=LATENCY_BUCKETS, registry=self.registry,
        )  # fmt: skip
        self.rejected = Counter("dojo_rejected", "Requests refused with 429", ["reason"], registry=self.registry)
        self.queue_depth = Gauge("dojo_queue_depth", "Requests waiting for a slot", registry=self.registry)
        self.admitted = Gauge("dojo_admitted", "Requests admitted (running or waiting)", registry=self.registry)
        self.live_sessions = Gauge("dojo_live_sessions", "Live sessions", registry=self.registry)
        self.slot_restarts = Gauge("dojo_slot_restarts", "Slots replaced after dying", registry=self.registry)
        # In front of a Ray cluster (dojo serve --ray): the fleet's nodes and failovers.
        self.fleet_nodes = Gauge("dojo_fleet_nodes", "Fleet nodes by state", ["state"], registry=self.registry)
        self.fleet_slots = Gauge("dojo_fleet_slots", "Slots on the fleet's ready nodes", registry=self.registry)
        self.fleet_reruns = Gauge("dojo_fleet_reruns", "Runs re-run because their node died", registry=self.registry)
        # Per node of the fleet (dojo dashboard draws one row each): 1 in its state's series, 0 in the others.
        node, reg = ["node", "address"], self.registry
        self.node_state = Gauge("dojo_fleet_node_state", "A fleet node's state", [*node, "state"], registry=reg)
        self.node_slots = Gauge("dojo_fleet_node_slots", "A fleet node's slots", node, registry=reg)
        self.node_outstanding = Gauge(
            "dojo_fleet_node_outstanding", "Runs sent to a fleet node and not yet answered", node, registry=reg
        )
        self.node_runs = Gauge("dojo_fleet_node_runs", "Runs a fleet node has answered", node, registry=reg)
