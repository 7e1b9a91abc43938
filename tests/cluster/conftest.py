"""A real Ray cluster on this machine: a head and 3 worker nodes (``ray.cluster_utils.Cluster``),
every one of them on loopback, shared by the tests of this directory."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import pytest_asyncio

from tests.sandbox.conftest import MODE, SKIP_REASON

# Ray picks this machine's outward address unless told that it is not a cluster of real hosts:
# then every process of every node binds 127.0.0.1 (checked by test_every_node_listens_on_loopback).
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
LOOPBACK = {"node_ip_address": "127.0.0.1", "num_cpus": 1}

requires_cluster = pytest.mark.skipif(
    bool(SKIP_REASON) or MODE != "root", reason=SKIP_REASON or "the Ray cluster tests run as root"
)


@dataclass
class LocalCluster:
    cluster: Any

    @property
    def address(self) -> str:
        return str(self.cluster.address)

    @property
    def workers(self) -> list[Any]:
        return list(self.cluster.worker_nodes)

    def add_node(self) -> Any:
        node = self.cluster.add_node(**LOOPBACK)
        self.cluster.wait_for_nodes()
        return node

    def kill(self, node: Any) -> None:
        self.cluster.remove_node(node, allow_graceful=False)

    def remove(self, node: Any) -> None:
        """Take a node out gracefully (its raylet and workers end)."""
        self.cluster.remove_node(node, allow_graceful=True)


@pytest.fixture(scope="package")
def ray_cluster() -> Iterator[LocalCluster]:
    if SKIP_REASON or MODE != "root":
        pytest.skip(SKIP_REASON or "the Ray cluster tests run as root")
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={**LOOPBACK, "include_dashboard": False})
    for _ in range(3):
        cluster.add_node(**LOOPBACK)
    cluster.wait_for_nodes()
    try:
        yield LocalCluster(cluster)
    finally:
        import ray

        ray.shutdown()
        cluster.shutdown()


@pytest_asyncio.fixture(scope="package")
async def fleet(ray_cluster: LocalCluster) -> AsyncIterator[Any]:
    from dojo.cluster import SandboxFleet

    async with SandboxFleet(ray_cluster.address, pool_size=2, min_nodes=4) as f:
        yield f
