"""dojo on a Ray cluster: one sandbox over every node (``SandboxFleet``), with failover and draining.

- ``node.py``: ``SandboxNode``, the actor that owns one node's warm pool and sessions;
- ``health.py``: when a node is dead, drained or recovered;
- ``member.py``: ``FleetNode`` (a node as the fleet sees it) and calls to its actor (``NodeLost``);
- ``fleet.py``: ``SandboxFleet``, ``AsyncSandbox``'s interface over all nodes: membership, routing, failover;
- ``session.py``: ``FleetSession``, a session that lives and dies with its node;
- ``connect.py``: joining the cluster, ``ClusterUnavailable``.
"""

from dojo.cluster.connect import ClusterUnavailable
from dojo.cluster.fleet import SandboxFleet
from dojo.cluster.health import HealthPolicy
from dojo.cluster.member import NodeLost
from dojo.cluster.node import NodeStats, SandboxNode
from dojo.cluster.session import FleetSession
from dojo.sandbox import AsyncSandbox, SandboxAPI

__all__ = [
    "ClusterUnavailable",
    "FleetSession",
    "HealthPolicy",
    "NodeLost",
    "NodeStats",
    "SandboxFleet",
    "SandboxNode",
    "sandbox_for",
]


def sandbox_for(ray: str | None, pool_size: int | None = None) -> SandboxAPI:
    """Where runs go: the fleet of the Ray cluster at ``ray`` (slots per node: ``pool_size``), or this
    machine's ``AsyncSandbox`` when ``ray`` is None. Not started yet."""
    if ray:
        return SandboxFleet(ray, pool_size=pool_size)
    return AsyncSandbox(pool_size=pool_size)
