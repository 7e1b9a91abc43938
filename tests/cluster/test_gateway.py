"""``dojo serve --ray`` (two gateways in front of one cluster) and ``dojo rollout --ray``."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from dojo.cli import app
from dojo.client import SandboxClient
from dojo.cluster import SandboxFleet
from dojo.sandbox import Program, Verdict
from tests.cluster.conftest import LocalCluster
from tests.conftest import free_port, serve_in_subprocess

pytestmark = pytest.mark.timeout(600)
runner = CliRunner()


def _gateway(address: str) -> tuple[subprocess.Popen[bytes], str]:
    return serve_in_subprocess("--ray", address, "--pool-size", "2")


@pytest.fixture(scope="module")
def gateways(ray_cluster: LocalCluster) -> Iterator[list[str]]:
    started = [_gateway(ray_cluster.address) for _ in range(2)]
    try:
        yield [url for _, url in started]
    finally:
        for proc, _ in started:
            proc.terminate()
        for proc, _ in started:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()


def test_two_gateways_serve_one_cluster_and_share_sessions(gateways: list[str]) -> None:
    a, b = gateways
    health = httpx.get(a + "/healthz").json()
    assert health["slots"] >= 8 and health["nodes"] == {"ready": 4}  # every node's slots, not one machine's
    metrics = httpx.get(a + "/metrics").text
    assert 'dojo_fleet_nodes{state="ready"} 4.0' in metrics and "dojo_fleet_reruns 0.0" in metrics
    fusion = httpx.post(a + "/run_code", json={"code": "print(6 * 7)", "language": "python"}, timeout=60).json()
    assert fusion.get("status") == "Success" and fusion["run_result"]["stdout"] == "42\n", fusion
    with SandboxClient(a) as client_a, SandboxClient(b) as client_b:
        results = [client_b.run(Program(language="python", source=f"print({i})")) for i in range(12)]
        assert [r.stdout for r in results] == [f"{i}\n" for i in range(12)]
        session = client_a.open_session("python")
        session.exec("total = 40")
        via_b = client_b._http.post(f"/v1/sessions/{session.id}/exec", json={"code": "print(total + 2)"})
        assert via_b.status_code == 200, via_b.text
        assert via_b.json()["stdout"] == "42\n" and via_b.json()["verdict"] == Verdict.ACCEPTED
        assert client_b._http.get("/v1/sessions/" + session.id[:-4] + "beef").status_code == 404
        session.close()


def test_serve_and_rollout_name_what_to_fix_for_a_missing_cluster(policy_server: str, tmp_path: Path) -> None:
    result = runner.invoke(app, ["serve", "--ray", "127.0.0.1:9", "--port", str(free_port())])
    assert result.exit_code != 0 and "ray start --head" in result.output
    args = ["rollout", "family:expressions?n=2", "--policy", policy_server, "--out", str(tmp_path / "r"),
            "--ray", "127.0.0.1:9"]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code != 0 and "ray start --head" in result.output


def test_rollout_on_the_fleet_matches_the_local_rollout(
    ray_cluster: LocalCluster, policy_server: str, tmp_path: Path
) -> None:
    dead = f"http://127.0.0.1:{free_port()}/v1"  # a policy server that died: its requests go to the live one
    common = ["family:expressions?n=6", "-n", "2", "--max-turns", "2", "--max-tokens", "16", "--temperature", "0"]
    summaries = {}
    for name, extra in {
        "local": ["--policy", policy_server],
        "fleet": ["--policy", policy_server, "--policy", dead, "--ray", ray_cluster.address, "--pool-size", "2"],
    }.items():
        out = tmp_path / name
        result = runner.invoke(app, ["rollout", *common, *extra, "--out", str(out), "--json", str(out) + ".json"])
        assert result.exit_code == 0, result.output
        summaries[name] = json.loads(Path(str(out) + ".json").read_text())
    local, fleet = summaries["local"], summaries["fleet"]
    assert fleet["episodes"] == local["episodes"] == 12
    assert fleet["pass@1"] == local["pass@1"] and fleet["verdicts"] == local["verdicts"]
    assert fleet["statuses"] == local["statuses"] and not fleet["retries"]


def test_dojo_trains_rollouts_run_on_the_fleet(ray_cluster: LocalCluster) -> None:
    """``dojo train``'s ``sandbox.ray``: DojoRollout's episodes are graded on the cluster's nodes."""
    from dojo.agent.policy import SamplingParams
    from dojo.integrations.event_loops import SANDBOXES
    from dojo.integrations.trl_rollout import DojoRollout
    from tests.agent.scripted import PARTLY, RIGHT, ScriptedPolicy, double_task

    tasks = [double_task(f"d{i}") for i in range(4)]
    rollout = DojoRollout(tasks, mode="single", pool_size=2, ray=ray_cluster.address)
    try:
        policy = ScriptedPolicy(lambda m, i: RIGHT if i % 2 == 0 else PARTLY)
        groups = rollout.run_groups(policy, tasks, group_size=2, sampling=SamplingParams(max_tokens=8))

        async def fleet_runs() -> int:
            from dojo.cluster import SandboxFleet

            sandbox = await SANDBOXES.get(2, ray_cluster.address)
            assert isinstance(sandbox, SandboxFleet)
            return sum(n.runs for n in sandbox.nodes.values())

        runs = rollout._loop.run(fleet_runs())
    finally:
        rollout.close()
    rewards = sorted(ep.reward.value for g in groups for ep in g.episodes if ep.reward is not None)
    assert rewards == [0.5] * 4 + [1.0] * 4  # every episode scored, as a local grader scores them
    assert runs >= 8  # every grading ran on the cluster's nodes


class _TestPrefixFleet(SandboxFleet):
    actor_prefix = "dojo-test-detached-"  # actors of their own, not the shared fleet's


async def test_a_gateways_node_actors_and_sessions_outlive_it(ray_cluster: LocalCluster) -> None:
    """``dojo serve --ray`` makes detached node actors: a gateway that stops (or restarts) leaves
    every node's pool and sessions to the other gateways."""
    import ray

    script = f"""
import asyncio
from dojo.cluster import SandboxFleet

class Fleet(SandboxFleet):
    actor_prefix = {_TestPrefixFleet.actor_prefix!r}

async def main():
    fleet = Fleet({ray_cluster.address!r}, pool_size=1, detached=True, min_nodes=4)
    await fleet.start()
    session = await fleet.open_session("python")
    await session.exec("kept = 7")
    print(session.id, flush=True)
    await fleet.close()

asyncio.run(main())
"""
    env = {**os.environ, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=180, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    session_id = proc.stdout.strip().splitlines()[-1]
    other = _TestPrefixFleet(ray_cluster.address, pool_size=1, detached=True, min_nodes=4)
    await other.start()
    try:
        session = await other.attach_session(session_id)
        assert session is not None, "the session died with the gateway that opened it"
        assert (await session.exec("print(kept)")).stdout == "7\n"
        await session.close()
    finally:
        node_ids = list(other.nodes)
        await other.close()
        for node_id in node_ids:  # detached: nothing closes them but this
            with contextlib.suppress(ValueError):
                ray.kill(ray.get_actor(_TestPrefixFleet.actor_prefix + node_id, namespace="dojo"))
