"""A rollout from start to store: run every task's group through the scheduler on a sandbox pool
and write finished groups to the trajectory store in shards, with the cost model beside them (so a
resumed run schedules slow tasks first from the start). ``dojo rollout`` is this plus a progress
bar and a summary."""

from __future__ import annotations

import time
from collections.abc import Callable

from dojo.agent.policy import OpenAIPolicy, Policy
from dojo.agent.policy_pool import PolicyPool
from dojo.rewards.graders import Grader
from dojo.rollout.costs import CostModel, save_costs
from dojo.rollout.scheduler import Group, RolloutConfig, RolloutScheduler
from dojo.rollout.store import TrajectoryStore
from dojo.sandbox import AsyncSandbox, SandboxAPI
from dojo.tasks.model import Task


async def rollout_to_store(
    tasks: list[Task],
    policy: Policy,
    config: RolloutConfig,
    store: TrajectoryStore,
    *,
    costs: CostModel | None = None,
    skip: set[str] | None = None,
    shard_groups: int = 8,
    flush_seconds: float = 10.0,
    pool_size: int | None = None,
    sandbox: SandboxAPI | None = None,
    on_group: Callable[[Group, RolloutScheduler], None] | None = None,
    user: Policy | None = None,
) -> RolloutScheduler:
    """Run ``tasks`` (minus ``skip``, the groups already stored) and store their groups: a shard
    every ``shard_groups`` groups or ``flush_seconds``, and whatever is finished when it stops
    (Ctrl-C included). Only complete groups are stored; a group the infrastructure failed is
    counted by the scheduler and left for a resumed run. Returns the scheduler (its stats).

    ``sandbox``: where episodes run (a ``dojo.cluster.SandboxFleet`` for a Ray cluster); by default
    a local ``AsyncSandbox`` of ``pool_size`` slots, started and closed here."""
    if shard_groups < 1 or flush_seconds <= 0:
        raise ValueError("shard_groups must be at least 1 and flush_seconds positive")
    if isinstance(policy, OpenAIPolicy | PolicyPool):
        await policy.model_name()  # fail now, with the server's address, rather than retry every episode
    costs = costs if costs is not None else CostModel()
    owned = sandbox is None
    sandbox = sandbox if sandbox is not None else AsyncSandbox(pool_size=pool_size)
    await sandbox.start()
    try:
        scheduler = RolloutScheduler(policy, Grader(sandbox), config, costs=costs, user=user)
        buffer: list[Group] = []
        last_flush = time.monotonic()

        def flush() -> None:
            nonlocal last_flush
            store.write_groups([(g.task, g.episodes) for g in buffer if g.complete])
            save_costs(store, costs)
            buffer.clear()
            last_flush = time.monotonic()

        try:
            async for group in scheduler.run(tasks, skip=skip or set()):
                buffer.append(group)
                if len(buffer) >= shard_groups or time.monotonic() - last_flush > flush_seconds:
                    flush()
                if on_group is not None:
                    on_group(group, scheduler)
        finally:
            flush()
        if hasattr(policy, "close"):
            await policy.close()
    finally:
        if owned:
            await sandbox.close()
    return scheduler
