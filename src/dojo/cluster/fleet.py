"""``SandboxFleet``: every node of a Ray cluster as one sandbox, with ``AsyncSandbox``'s interface.

    async with SandboxFleet("127.0.0.1:6379") as fleet:       # or Grader(fleet), EpisodeRunner, ...
        result = await fleet.run(Program(language="python", source="print(1)"))

- Membership: one ``SandboxNode`` actor per alive Ray node, placed by node id and named after it (so
  several fleets, one per gateway, share them; ``detached=True``, as ``dojo serve --ray`` sets it,
  makes them outlive the fleet, so a gateway's restart keeps every node's warm pool and sessions);
  a node that joins gets an actor within ``discover_interval`` plus its pool's start; a node that
  cannot isolate runs is left out and said so.
- Routing: a run goes to the ready node with the least outstanding work per slot (this fleet's runs
  plus what the node's last probe said others sent it); runs submitted in one event-loop turn to one
  node cross to it as one actor call (``run_batch``).
- Failover: a node whose actor died, or that missed ``dead_after`` probes, is dead: its outstanding
  one-shot runs are re-run on other nodes (a run is idempotent; the first result wins), up to
  ``max_attempts`` nodes per run, and then the run's result is a SandboxError, never a verdict of the
  program. Its sessions end: their next call says the node was lost.
- Draining: see ``dojo.cluster.health``.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import statistics
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Self

from dojo.cluster.connect import NAMESPACE, ClusterUnavailable, connect
from dojo.cluster.health import HealthPolicy, NodeHealth, load_per_slot
from dojo.cluster.member import (
    FleetNode,
    NodeLost,
    PendingRun,
    actor_exists,
    await_or_lost,
    await_ref,
    call_node,
    cause_of,
    retrieve,
)
from dojo.cluster.node import NodeStats, RunCall, RunOutcome, SandboxNode
from dojo.cluster.session import FleetSession
from dojo.errors import InputError
from dojo.sandbox.backend import Isolation, SandboxAPI, SessionAPI
from dojo.sandbox.errors import SandboxError
from dojo.sandbox.languages import get_language
from dojo.sandbox.limits import DEFAULT_LIMITS, Limits
from dojo.sandbox.program import Program
from dojo.sandbox.result import ExecutionResult
from dojo.sandbox.uncancellable import to_the_end

log = logging.getLogger(__name__)
ACTOR_PREFIX = "dojo-sandbox-"
RESTART_AFTER = 5.0  # seconds before a node whose actor died (while Ray says the node lives) gets a new one


class SandboxFleet:
    """A sandbox spread over a Ray cluster (see the module doc). ``pool_size`` is slots per node."""

    actor_prefix = ACTOR_PREFIX  # node actors are named this plus the node id, in namespace "dojo"

    def __init__(
        self,
        address: str = "auto",
        *,
        pool_size: int | None = None,
        limits: Limits = DEFAULT_LIMITS,
        session_ttl: float = 600.0,
        health: HealthPolicy | None = None,
        max_batch: int = 64,  # 64 results stay under Ray's 100 KB inline-return size: no object store on the path
        max_attempts: int = 3,
        start_timeout: float = 180.0,
        min_nodes: int = 1,
        detached: bool = False,
    ) -> None:
        if pool_size is not None and pool_size < 1:
            raise InputError(f"pool_size (slots per node) must be at least 1, got {pool_size}")
        if max_batch < 1 or max_attempts < 1 or min_nodes < 1:
            raise InputError("max_batch, max_attempts and min_nodes must be at least 1")
        self.address = address
        self.node_pool_size = pool_size
        self.limits = limits
        self.session_ttl = session_ttl
        self.health = health or HealthPolicy()
        self.max_batch = max_batch
        self.max_attempts = max_attempts
        self.start_timeout = start_timeout
        self.min_nodes = min_nodes
        self.detached = detached
        self.nodes: dict[str, FleetNode] = {}
        self.reruns = 0  # runs re-run because their node died
        self.failed_runs = 0  # runs that exhausted max_attempts
        self.last_rerun_finished: float | None = None  # monotonic time the latest re-run run finished
        self.events: list[tuple[float, str]] = []  # (monotonic time, what happened), for logs, tests and benches
        self._ids = itertools.count()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._monitor: asyncio.Task[None] | None = None
        self._owns_ray = False
        self._started = False
        self._start_lock = asyncio.Lock()

    # Lifecycle

    @property
    def started(self) -> bool:
        return self._started

    @property
    def pool_size(self) -> int:
        return sum(n.slots for n in self.ready_nodes()) or (self.node_pool_size or 1)

    async def start(self) -> Self:
        async with self._start_lock:
            if self._started:
                return self
            self._owns_ray = await asyncio.to_thread(connect, self.address)
            try:
                await self._discover()
                await self._wait_first_nodes()
            except BaseException:
                await self._shutdown()
                raise
            self._started = True
            self._monitor = asyncio.create_task(self._watch())
        return self

    async def _wait_first_nodes(self) -> None:
        deadline = time.monotonic() + self.start_timeout
        while True:
            starting = [n for n in self.nodes.values() if n.state == "starting"]
            if len(self.ready_nodes()) >= self.min_nodes or (not starting and self.ready_nodes()):
                return
            if not starting:
                await self._discover()
                starting = [n for n in self.nodes.values() if n.state == "starting"]
                if not starting:
                    break
            if time.monotonic() > deadline:
                if self.ready_nodes():  # fewer than min_nodes came up in time: serve with those
                    self._event(f"started with {len(self.ready_nodes())} of {self.min_nodes} nodes")
                    return
                break
            await asyncio.sleep(0.05)
        why = "; ".join(f"node {n.short} ({n.address}): {n.reason or n.state}" for n in self.nodes.values())
        raise ClusterUnavailable(
            f"no node of the Ray cluster at {self.address!r} can run dojo's sandbox"
            f"{' (' + why + ')' if why else ' (the cluster has no alive node)'}. Each node needs Linux, root (or "
            "unprivileged user namespaces) and dojo installed; see docs/scale.md"
        )

    async def close(self) -> None:
        """Close every node's sandbox (and Ray, when the fleet started it); a cancelled close still
        goes to the end (``to_the_end``), so no node is left with its slots running."""
        await to_the_end(self._shutdown())

    async def _shutdown(self) -> None:
        self._started = False
        if self._monitor is not None:
            self._monitor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._monitor
            self._monitor = None
        for task in list(self._tasks):
            task.cancel()
        closing = [n.actor.close.remote() for n in self.nodes.values() if n.created and n.state == "ready"]
        if closing:
            calls = [asyncio.ensure_future(await_ref(ref)) for ref in closing]
            for call in calls:
                call.add_done_callback(retrieve)
            await asyncio.wait(calls, timeout=10)
        for node in self.nodes.values():
            for p in node.outstanding.values():  # a queued run is outstanding too
                if not p.future.done():
                    p.future.set_exception(SandboxError("the sandbox fleet was closed"))
        self.nodes = {}  # a restarted fleet meets its nodes again
        if self._owns_ray:
            import ray

            await asyncio.to_thread(ray.shutdown)
            self._owns_ray = False

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def ready_nodes(self) -> list[FleetNode]:
        return [n for n in self.nodes.values() if n.state == "ready"]

    def _event(self, what: str) -> None:
        self.events.append((time.monotonic(), what))
        log.info("fleet: %s", what)

    # Membership

    async def _discover(self) -> None:
        import ray

        alive = {n["NodeID"]: n for n in await asyncio.to_thread(ray.nodes) if n.get("Alive")}
        for node_id, node in list(self.nodes.items()):
            if node_id not in alive and node.state in ("ready", "starting"):
                self.mark_dead(node, "Ray reports the node dead")
        for node_id, info in alive.items():
            known = self.nodes.get(node_id)
            if known is not None and (known.state != "dead" or time.monotonic() - known.since < RESTART_AFTER):
                continue
            node = FleetNode(node_id=node_id, address=str(info.get("NodeManagerAddress", "?")))
            node.health = NodeHealth(self.health)
            self.nodes[node_id] = node
            self._spawn(self._start_node(node))

    def _actor_class(self) -> Any:
        import ray

        return ray.remote(SandboxNode)

    async def _start_node(self, node: FleetNode) -> None:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        name = self.actor_prefix + node.node_id
        try:
            # A detached actor outlives this fleet (a gateway's restart keeps the node's sessions): never closed here.
            node.created = not self.detached and not await asyncio.to_thread(actor_exists, name)
            node.actor = (
                self._actor_class()
                .options(
                    name=name,
                    namespace=NAMESPACE,
                    get_if_exists=True,
                    num_cpus=0,
                    max_concurrency=100_000,
                    max_restarts=0,
                    lifetime="detached" if self.detached else None,
                    scheduling_strategy=NodeAffinitySchedulingStrategy(node.node_id, soft=False),
                )
                .remote(node.node_id, self.node_pool_size, self.session_ttl)
            )
            node.slots = await asyncio.wait_for(await_ref(node.actor.start.remote()), self.start_timeout)
        except Exception as e:
            reason = cause_of(e)
            if node.actor is not None and node.created:
                with contextlib.suppress(Exception):
                    import ray

                    ray.kill(node.actor, no_restart=True)
            if node.state == "starting":
                node.state = "unusable"
                node.reason = reason
                node.since = time.monotonic()
                self._event(f"node {node.short} cannot run the sandbox: {reason}")
            return
        if node.state != "starting":
            return
        node.state = "ready"
        node.since = time.monotonic()
        self._event(f"node {node.short} joined with {node.slots} slots")

    def mark_dead(self, node: FleetNode, reason: str) -> None:
        if node.state == "dead":
            return
        node.state = "dead"
        node.reason = reason
        node.since = time.monotonic()
        node.lost.set()
        orphans = [p for p in node.outstanding.values() if not p.future.done()]  # queued runs are in it too
        node.queue.clear()
        node.outstanding.clear()
        self._event(f"node {node.short} dead ({reason}); re-running {len(orphans)} runs elsewhere")
        if node.actor is not None:
            with contextlib.suppress(Exception):
                import ray

                ray.kill(node.actor, no_restart=True)
        for p in orphans:
            self.reruns += 1
            self._submit(p)

    # Health

    async def _watch(self) -> None:
        last_discover = time.monotonic()
        while True:
            # A fleet's own cost stays bounded on a big cluster: at most max_probes_per_second probes,
            # and the node list (a GCS call that grows with the cluster) at most once per 100 nodes-seconds.
            n = len(self.nodes)
            await asyncio.sleep(max(self.health.probe_interval, n / self.health.max_probes_per_second))
            try:
                await self._probe_all()
                if time.monotonic() - last_discover >= max(self.health.discover_interval, n / 100):
                    last_discover = time.monotonic()
                    await self._discover()
            except Exception:  # keep watching whatever one round did
                log.exception("fleet health round failed")

    async def _probe_all(self) -> None:
        nodes = self.ready_nodes()
        answers = await asyncio.gather(*(self._probe(n) for n in nodes))
        loads = [load_per_slot(s) for s, _ in answers if s is not None]
        median = statistics.median(loads) if loads else 0.0
        for node, (stats, rtt) in zip(nodes, answers, strict=True):
            assert node.health is not None
            if node.state != "ready":
                continue
            if stats is None:
                if node.health.probe_failed():
                    self.mark_dead(node, f"no answer to {node.health.failed_probes} probes in a row")
                continue
            was = node.health.drained_for
            node.others = max(0, stats.inflight - len(node.outstanding))
            node.health.observe(stats, rtt, median)
            if node.health.drained_for != was:
                self._event(
                    f"node {node.short} " + (f"drained ({node.health.drained_for})" if node.drained else "recovered")
                )

    async def _probe(self, node: FleetNode) -> tuple[NodeStats | None, float]:
        t0 = time.monotonic()
        try:
            stats: NodeStats = await asyncio.wait_for(await_ref(node.actor.stats.remote()), self.health.probe_timeout)
        except Exception:
            return None, time.monotonic() - t0
        return stats, time.monotonic() - t0

    def stats(self) -> dict[str, Any]:
        """Per node: state, slots, outstanding runs, sessions, drain reason, last probe."""
        return {
            n.node_id: {
                "state": n.state,
                "address": n.address,
                "slots": n.slots,
                "outstanding": len(n.outstanding),
                "sessions": n.sessions,
                "runs": n.runs,
                "drained": n.health.drained_for if n.health else None,
                "reason": n.reason or None,
            }
            for n in self.nodes.values()
        }

    # Runs

    def _choose(self, exclude: Iterable[str] = ()) -> FleetNode | None:
        skip = set(exclude)
        ready = [n for n in self.ready_nodes() if n.node_id not in skip] or self.ready_nodes()
        healthy = [n for n in ready if not n.drained] or ready
        return min(healthy, key=FleetNode.load, default=None)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _submit(self, p: PendingRun) -> None:
        if p.future.done():
            return
        if p.attempts >= self.max_attempts:
            self.failed_runs += 1
            p.future.set_result(
                ExecutionResult.from_sandbox_error(
                    f"the run was lost with {p.attempts} nodes of the fleet ({', '.join(n[:16] for n in p.nodes)})",
                    p.call.program.language,
                )
            )
            return
        node = self._choose(exclude=p.nodes)
        if node is None:
            self._spawn(self._submit_when_ready(p))
            return
        p.attempts += 1
        p.nodes.append(node.node_id)
        node.outstanding[p.id] = p
        node.queue.append(p)
        if not node.flush_scheduled:
            node.flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush, node)

    async def _submit_when_ready(self, p: PendingRun) -> None:
        """No ready node now: wait (up to the start timeout) for one to join."""
        deadline = time.monotonic() + self.start_timeout
        while not self.ready_nodes() and time.monotonic() < deadline and self._started:
            await asyncio.sleep(0.1)
        if not self.ready_nodes():
            if not p.future.done():
                self.failed_runs += 1
                p.future.set_result(
                    ExecutionResult.from_sandbox_error("no node of the fleet is alive", p.call.program.language)
                )
            return
        self._submit(p)

    def _flush(self, node: FleetNode) -> None:
        node.flush_scheduled = False
        if node.state != "ready":
            waiting, node.queue = node.queue, []
            for p in waiting:
                node.outstanding.pop(p.id, None)
                self._submit(p)
            return
        while node.queue:
            batch = node.queue[: self.max_batch]
            del node.queue[: self.max_batch]
            ref = node.actor.run_batch.remote([p.call for p in batch])
            self._spawn(self._collect(node, batch, ref))

    async def _collect(self, node: FleetNode, batch: list[PendingRun], ref: Any) -> None:
        import ray.exceptions as rex

        try:
            outcomes: list[RunOutcome] = await await_or_lost(ref, node)
        except NodeLost:
            return  # mark_dead re-submitted the batch
        except rex.RayActorError as e:
            self.mark_dead(node, f"its sandbox actor died ({type(e).__name__})")
            return
        except Exception as e:  # the node failed this batch (not the programs): try them elsewhere
            self._event(f"node {node.short} failed a batch of {len(batch)}: {cause_of(e)}")
            for p in batch:
                if node.outstanding.pop(p.id, None) is not None:
                    self._submit(p)
            return
        node.runs += len(batch)
        for p, outcome in zip(batch, outcomes, strict=True):
            node.outstanding.pop(p.id, None)
            if p.future.done():
                continue
            if outcome.input_error is not None:
                p.future.set_exception(InputError(outcome.input_error))
            else:
                assert outcome.result is not None
                p.future.set_result(outcome.result)
            if p.attempts > 1:
                self.last_rerun_finished = time.monotonic()

    async def run(
        self,
        program: Program,
        limits: Limits | None = None,
        *,
        compile_limits: Limits | None = None,
        isolation: Isolation | None = None,
        cache_compiled: bool = False,
        harness: bool = False,
    ) -> ExecutionResult:
        """Run one program on the least loaded node; see ``AsyncSandbox.run``."""
        if not self._started:
            await self.start()
        get_language(program.language)  # an unknown language is the caller's input: say so here
        call = RunCall(program, limits or self.limits, compile_limits, isolation, cache_compiled, harness)
        p = PendingRun(next(self._ids), call, asyncio.get_running_loop().create_future())
        self._submit(p)
        return await p.future

    async def run_many(self, programs: Iterable[Program], limits: Limits | None = None) -> list[ExecutionResult]:
        return list(await asyncio.gather(*(self.run(p, limits) for p in programs)))

    # Sessions

    async def open_session(
        self, language: str, limits: Limits | None = None, environment: str | None = None
    ) -> FleetSession:
        """A session on the node with the fewest sessions; it lives and dies with that node. An
        environment must be built on every node (``dojo env build`` there, same name)."""
        if not self._started:
            await self.start()
        lang = get_language(language)
        ready = [n for n in self.ready_nodes() if not n.drained] or self.ready_nodes()
        if not ready:
            raise SandboxError("no node of the fleet is alive to hold a session")
        node = min(ready, key=lambda n: (n.sessions / max(1, n.slots), n.load()))
        node.sessions += 1
        try:
            ref = node.actor.open_session.remote(language, limits or self.limits, self.session_ttl, environment)
            token = await call_node(node, ref, self.mark_dead)
        except BaseException:
            node.sessions -= 1
            raise
        return FleetSession(self, node, token, lang, limits or self.limits)

    async def attach_session(self, session_id: str) -> FleetSession | None:
        """The live session ``session_id`` (opened by any fleet on this cluster), or None."""
        prefix, sep, token = session_id.partition("-")
        node = next((n for n in self.ready_nodes() if n.short == prefix), None)
        if not sep or node is None:
            return None
        try:
            language, limits, execs, idle = await call_node(node, node.actor.session_info.remote(token), self.mark_dead)
        except SandboxError:
            return None
        node.sessions += 1
        session = FleetSession(self, node, token, get_language(language), limits)
        session.execs = execs
        session.last_used = time.monotonic() - idle
        return session


if TYPE_CHECKING:  # mypy proves that a fleet stands in for AsyncSandbox wherever one is used

    def _a_fleet_is_a_sandbox(fleet: SandboxFleet) -> SandboxAPI:
        return fleet

    def _a_fleet_session_is_a_session(session: FleetSession) -> SessionAPI:
        return session
