"""A node killed in the middle of a rollout, and a node that joins: the cluster tests that matter.

Runs after test_fleet.py (it changes the cluster: one worker dies, a new one joins)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from dojo.cluster import SandboxFleet
from dojo.rollout.run import rollout_to_store
from dojo.rollout.scheduler import Group, RolloutConfig, RolloutScheduler
from dojo.rollout.store import TrajectoryStore
from dojo.sandbox import Program, Verdict
from tests.agent.scripted import PARTLY, RIGHT, ScriptedPolicy, double_task
from tests.cluster.conftest import LocalCluster

pytestmark = pytest.mark.timeout(600)


@pytest_asyncio.fixture(scope="module", autouse=True)
async def cluster_as_found(fleet: SandboxFleet, ray_cluster: LocalCluster) -> AsyncIterator[None]:
    """This module kills a node and takes out the one that joined: at its end the package's cluster
    gets back to as many ready nodes as it had, for the modules after it (each test leaves no
    process of its own behind; these belong to the package's cluster)."""
    nodes = len(fleet.ready_nodes())
    yield
    while len(ray_cluster.workers) + 1 < nodes:
        ray_cluster.add_node()
    for _ in range(300):
        if len(fleet.ready_nodes()) >= nodes:
            break
        await asyncio.sleep(0.1)


SLOW = "```python\nimport time\ntime.sleep(0.4)\n"  # every grading holds a slot for a while


def _reply(messages: list[dict[str, Any]], _call: int) -> str:
    # Tasks t0, t2, ... are answered right, t1, t3, ... wrong (their visible tests fail too).
    task_number = int(messages[-1]["content"].split("TASK-")[1].split()[0])
    return (RIGHT if task_number % 2 == 0 else PARTLY).replace("```python\n", SLOW)


async def test_a_node_killed_mid_rollout_loses_nothing_and_scores_no_failure(
    fleet: SandboxFleet, ray_cluster: LocalCluster, tmp_path: Path
) -> None:
    tasks = []
    for i in range(48):
        task = double_task(f"t{i}")
        tasks.append(task.model_copy(update={"prompt": f"# TASK-{i} \n" + task.prompt}))
    victim = ray_cluster.workers[0]
    victim_id = victim.node_id
    session = await fleet.open_session("python")
    while session.node.node_id != victim_id:  # a session that lives on the node about to die
        session = await fleet.open_session("python")
    await session.exec("state = 1")
    killed = asyncio.Event()

    def on_group(group: Group, scheduler: RolloutScheduler) -> None:
        if scheduler.stats.groups == 6 and not killed.is_set():
            killed.set()
            asyncio.get_running_loop().run_in_executor(None, ray_cluster.kill, victim)

    store = TrajectoryStore(str(tmp_path / "run"), run_id="failover")
    config = RolloutConfig(group_size=2, max_groups_in_flight=8)
    policy = ScriptedPolicy(_reply, delay=0.02)
    scheduler = await rollout_to_store(tasks, policy, config, store, sandbox=fleet, shard_groups=4, on_group=on_group)
    assert killed.is_set()

    rows = list(store.rows())
    by_group: dict[str, int] = {}
    for row in rows:
        by_group[row["group_id"]] = by_group.get(row["group_id"], 0) + 1
    assert sorted(by_group) == sorted(t.id for t in tasks)  # every group stored
    assert set(by_group.values()) == {2}  # exactly once: two episodes per group, no duplicate
    for row in rows:
        assert row["status"] == "answered" and row["error"] is None, row["error"]
        number = int(row["task_id"][1:])
        if number % 2 == 0:
            assert row["reward"] == 1.0 and row["verdict"] == "pass"
        else:
            assert row["reward"] == 0.5 and row["verdict"] == "partial"  # as a local grader says
    assert scheduler.stats.groups_incomplete == 0 and not scheduler.stats.failures
    assert fleet.reruns > 0  # the dead node had runs in flight, and they ran elsewhere
    # The victim's session ended with a sandbox error, never a verdict of the code.
    result = await session.exec("print(state)")
    assert result.verdict is Verdict.SANDBOX_ERROR and "lost" in (result.sandbox_error or "")
    assert not session.alive
    state = fleet.stats()[victim_id]
    assert state["state"] == "dead"


async def test_a_node_that_joins_gets_work(fleet: SandboxFleet, ray_cluster: LocalCluster) -> None:
    node = ray_cluster.add_node()  # Ray sets signal handlers: the main thread only (the loop pauses meanwhile)
    new_id = node.node_id
    try:
        for _ in range(200):  # the fleet's discovery meets it within seconds
            if new_id in fleet.nodes and fleet.nodes[new_id].state == "ready":
                break
            await asyncio.sleep(0.1)
        assert fleet.nodes[new_id].state == "ready"
        results = await fleet.run_many([Program(language="python", source="print(5)")] * 80)
        assert all(r.stdout == "5\n" for r in results)
        assert fleet.nodes[new_id].runs > 0
        assert len(fleet.ready_nodes()) == 4  # head + 2 survivors + the new node
    finally:
        ray_cluster.remove(node)  # its raylet would outlive the test
    for _ in range(300):  # and the fleet sees it go
        if new_id not in {n.node_id for n in fleet.ready_nodes()}:
            break
        await asyncio.sleep(0.1)
    assert new_id not in {n.node_id for n in fleet.ready_nodes()}


async def test_a_hung_node_is_declared_dead_and_its_runs_finish_elsewhere_once(fleet: SandboxFleet) -> None:
    """A node whose sandbox actor stops answering (SIGSTOP: a machine swapping to death, a hung
    kernel) mid-batch: its runs are re-run elsewhere, each result arrives once, then the node gets
    a fresh actor and work again."""
    import os
    import signal

    import ray

    victim = next(n for n in fleet.ready_nodes())
    actor = ray.get_actor(f"{fleet.actor_prefix}{victim.node_id}", namespace="dojo")
    pid = (await asyncio.wrap_future(actor.stats.remote().future())).pid
    programs = [Program(language="python", source=f"import time; time.sleep(0.3); print({i})") for i in range(48)]
    reruns = fleet.reruns
    task = asyncio.ensure_future(fleet.run_many(programs))
    await asyncio.sleep(0.4)  # the victim holds some of them now
    os.kill(pid, signal.SIGSTOP)
    try:
        results = await task
    finally:
        os.kill(pid, signal.SIGCONT)
    assert [r.stdout for r in results] == [f"{i}\n" for i in range(48)]  # each once, in order, none lost
    assert fleet.stats()[victim.node_id]["state"] == "dead"
    assert "no answer" in (fleet.stats()[victim.node_id]["reason"] or "")
    assert fleet.reruns > reruns
    for _ in range(300):  # the node itself lives: it gets a fresh actor
        node = fleet.nodes.get(victim.node_id)
        if node is not None and node.state == "ready":
            break
        await asyncio.sleep(0.1)
    assert fleet.nodes[victim.node_id].state == "ready"
    again = await fleet.run_many([Program(language="python", source="print(3)")] * 40)
    assert all(r.stdout == "3\n" for r in again) and fleet.nodes[victim.node_id].runs > 0
