"""A node as the fleet sees it (``FleetNode``) and calls to its actor: awaited as asyncio, ended at
once when the fleet declares the node lost (``NodeLost``), the actor's own errors turned back into
dojo's."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from dojo.cluster.connect import NAMESPACE
from dojo.cluster.health import NodeHealth
from dojo.cluster.node import RunCall
from dojo.errors import InputError
from dojo.sandbox.errors import SandboxError
from dojo.sandbox.result import ExecutionResult

NodeState = Literal["starting", "ready", "dead", "unusable"]


class NodeLost(SandboxError):
    """The node that held a session (or ran a batch) died; its state is gone."""


@dataclass(eq=False)
class PendingRun:
    """A run submitted to the fleet: its call, the future its caller awaits, the nodes it was sent to."""

    id: int
    call: RunCall
    future: asyncio.Future[ExecutionResult]
    attempts: int = 0
    nodes: list[str] = field(default_factory=list)


@dataclass(eq=False)
class FleetNode:
    """The fleet's view of one node."""

    node_id: str
    address: str
    actor: Any = None
    state: NodeState = "starting"
    slots: int = 0
    outstanding: dict[int, PendingRun] = field(default_factory=dict)  # sent or queued, by id, until answered
    queue: list[PendingRun] = field(default_factory=list)  # outstanding runs not sent yet (the next batch)
    flush_scheduled: bool = False
    health: NodeHealth | None = None
    sessions: int = 0
    lost: asyncio.Event = field(default_factory=asyncio.Event)
    reason: str = ""
    since: float = field(default_factory=time.monotonic)
    others: int = 0  # runs the node holds for other callers, by its last probe
    runs: int = 0
    created: bool = False  # this fleet created the actor (and closes it); else another fleet shares it

    @property
    def short(self) -> str:
        return self.node_id[:16]

    @property
    def drained(self) -> bool:
        return self.health is not None and self.health.drained_for is not None

    def load(self) -> float:
        return (len(self.outstanding) + self.others) / max(1, self.slots)


def actor_exists(name: str) -> bool:
    import ray

    try:
        ray.get_actor(name, namespace=NAMESPACE)
    except ValueError:
        return False
    return True


def retrieve(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()


async def await_ref(ref: Any) -> Any:
    return await asyncio.wrap_future(ref.future())


async def await_or_lost(ref: Any, node: FleetNode) -> Any:
    """The call's value, or NodeLost as soon as the fleet declares the node dead."""
    call = asyncio.ensure_future(await_ref(ref))
    call.add_done_callback(retrieve)  # a call abandoned for a lost node fails later, unheard
    lost = asyncio.ensure_future(node.lost.wait())
    try:
        await asyncio.wait({call, lost}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        lost.cancel()
    if not call.done():
        call.cancel()
        raise NodeLost(f"node {node.short} was lost ({node.reason})")
    return call.result()


async def call_node(node: FleetNode, ref: Any, on_dead: Callable[[FleetNode, str], None] | None = None) -> Any:
    """A node call's value; the node's own errors come back as dojo's errors, its death as NodeLost
    (after ``on_dead``: the fleet marks the node dead)."""
    import ray.exceptions as rex

    try:
        return await await_or_lost(ref, node)
    except rex.RayActorError as e:
        if on_dead is not None:
            on_dead(node, f"its sandbox actor died ({type(e).__name__})")
        raise NodeLost(f"the node holding this session ({node.short}) died; the session's state is gone") from e
    except rex.RayTaskError as e:
        cause = e.cause if isinstance(e.cause, BaseException) else None
        if isinstance(cause, (InputError, SandboxError)):
            raise cause from None
        raise SandboxError(f"node {node.short}: {cause_of(e)}") from e


def cause_of(e: BaseException) -> str:
    import ray.exceptions as rex

    if isinstance(e, rex.RayTaskError) and isinstance(e.cause, BaseException):
        e = e.cause
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[-1] if text else ''}"
