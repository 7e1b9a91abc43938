"""The fleet on a real 4-node Ray cluster: routing, batching, sessions across fleets, draining,
and the errors a user sees for a missing cluster or one that cannot isolate runs."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

import pytest

from dojo.cluster import ClusterUnavailable, SandboxFleet, SandboxNode
from dojo.cluster.fleet import ACTOR_PREFIX
from dojo.errors import InputError
from dojo.sandbox import IsolationUnavailable, Program, Verdict
from dojo.sandbox.errors import SandboxError
from tests.cluster.conftest import LocalCluster

pytestmark = pytest.mark.timeout(600)


async def test_runs_spread_over_every_node_with_right_answers(fleet: SandboxFleet) -> None:
    before = {nid: n.runs for nid, n in fleet.nodes.items()}
    programs = [Program(language="python", source=f"print({i} * {i})") for i in range(200)]
    results = await fleet.run_many(programs)
    assert [r.stdout for r in results] == [f"{i * i}\n" for i in range(200)]
    assert all(r.verdict is Verdict.ACCEPTED for r in results)
    got = {nid: n.runs - before.get(nid, 0) for nid, n in fleet.nodes.items() if n.state == "ready"}
    assert len(got) == 4 and all(runs > 0 for runs in got.values()), got
    assert fleet.pool_size == 8  # 2 slots on each of 4 nodes


async def test_user_failures_are_verdicts_and_bad_input_is_the_callers_error(fleet: SandboxFleet) -> None:
    results = await fleet.run_many(
        [
            Program(language="python", source="raise SystemExit(3)"),
            Program(language="python", source="while True: pass"),
            Program(language="c", source="int main() { return 0 }"),
        ]
    )
    assert [r.verdict for r in results] == [Verdict.RUNTIME_ERROR, Verdict.TIME_LIMIT_EXCEEDED, Verdict.COMPILE_ERROR]
    with pytest.raises(InputError, match="cobol"):
        await fleet.run(Program(language="cobol", source="x"))


async def test_a_session_keeps_its_state_and_a_second_fleet_reaches_it_by_id(
    fleet: SandboxFleet, ray_cluster: LocalCluster
) -> None:
    session = await fleet.open_session("python")
    try:
        assert (await session.exec("x = 20")).verdict is Verdict.ACCEPTED
        await session.write_file("notes.txt", b"kept")
        # another gateway on the same cluster, which knows every node before it is asked
        other = SandboxFleet(ray_cluster.address, pool_size=2, min_nodes=len(fleet.ready_nodes()))
        await other.start()
        try:
            attached = await other.attach_session(session.id)
            assert attached is not None and attached.node.node_id == session.node.node_id
            result = await attached.exec("print(x + 1, open('notes.txt').read())")
            assert result.stdout == "21 kept\n"
            assert await other.attach_session(session.id[:-2] + "00") is None  # a guessed id reaches nothing
        finally:
            await other.close()  # it found the first fleet's actors: it leaves them running
        with pytest.raises(FileNotFoundError):
            await session.read_file("missing.txt")
    finally:
        await session.close()
    with pytest.raises(SandboxError, match="closed"):
        await session.exec("print(1)")


async def test_a_backed_up_node_is_drained_until_it_recovers(fleet: SandboxFleet) -> None:
    import ray

    victim = next(n for n in fleet.ready_nodes())
    actor = ray.get_actor(ACTOR_PREFIX + victim.node_id, namespace="dojo")
    # Another client (say, a second gateway) fills the node: 16 runs of 2.5 s on 2 slots, a backlog
    # of ~20 s: the 60 runs below must find the node still drained on a loaded machine too
    sleeper = Program(language="python", source="import time; time.sleep(2.5)")
    from dojo.cluster.node import RunCall

    backlog = actor.run_batch.remote([RunCall(sleeper)] * 16)
    deadline = time.monotonic() + 20
    while not victim.drained and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    assert victim.drained and "backed up" in str(victim.health.drained_for if victim.health else "")
    runs_before = victim.runs
    results = await fleet.run_many([Program(language="python", source="print(7)")] * 60)
    assert all(r.stdout == "7\n" for r in results)
    assert victim.runs == runs_before  # no new work while drained
    await asyncio.wrap_future(backlog.future())
    deadline = time.monotonic() + 20
    while victim.drained and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    assert not victim.drained  # it recovered and gets work again
    events = [e for _, e in fleet.events if victim.short in e]
    assert any("drained (backed up" in e for e in events) and any("recovered" in e for e in events)


def _ray_listening_addresses() -> list[str]:
    """Local addresses of the listening TCP sockets of Ray's processes (raylet, GCS, workers), from /proc."""
    inodes: set[str] = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            if not any(name in cmd for name in (b"raylet", b"gcs_server", b"ray::", b"dashboard")):
                continue
            for fd in os.listdir(f"/proc/{pid}/fd"):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:
            continue
    found = []
    for table, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # LISTEN
                found.append(fields[1][:width])
    return found


def test_every_node_listens_on_loopback(ray_cluster: LocalCluster) -> None:
    addresses = _ray_listening_addresses()
    assert addresses  # the cluster's processes were found
    loopback = {"0100007F", "0000000000000000FFFF00000100007F", "00000000000000000000000001000000"}
    assert [a for a in addresses if a not in loopback] == []


async def test_an_unreachable_address_is_a_clear_error() -> None:
    with pytest.raises(ClusterUnavailable, match="ray start --head"):
        await SandboxFleet("127.0.0.1:9").start()
    with pytest.raises(ClusterUnavailable, match="HOST:PORT"):
        await SandboxFleet("not an address").start()


class _NoIsolationNode(SandboxNode):
    async def start(self) -> int:
        raise IsolationUnavailable("dojo's sandbox needs root or unprivileged user namespaces (test node)")


class _NoIsolationFleet(SandboxFleet):
    actor_prefix = "dojo-test-incapable-"  # the capable fleet's actors hold the real names on these nodes

    def _actor_class(self) -> Any:
        import ray

        return ray.remote(_NoIsolationNode)


async def test_a_cluster_with_no_capable_node_says_what_to_fix(ray_cluster: LocalCluster, fleet: SandboxFleet) -> None:
    import ray

    incapable = _NoIsolationFleet(ray_cluster.address, start_timeout=60)
    with pytest.raises(ClusterUnavailable) as info:
        await incapable.start()
    message = str(info.value)
    assert "no node of the Ray cluster" in message and "IsolationUnavailable" in message and "root" in message
    assert ray.is_initialized()  # a fleet that joined this process's existing connection leaves it connected
    assert (await fleet.run(Program(language="python", source="print(2)"))).stdout == "2\n"
