"""Cluster benchmark: dojo's sandbox fleet on a simulated Ray cluster (every node on this machine,
on loopback), against the local AsyncSandbox, in one process.

    .venv/bin/python bench/cluster.py [--repeats 3] [--runs 1500] [--pool-size 4] [--sessions 2000] [--kills 3]

Measures, each figure a median over --repeats rounds (rounds interleave the ways compared):
1. overhead: print(1) throughput at concurrency 32, local AsyncSandbox vs a 1-node fleet, same slots;
2. scaling: the same workload on 1, 2 and 3 nodes (they share this machine's cores: this shows the
   fleet's cost as nodes are added, not the speed-up of real nodes);
3. failover: 3 nodes under load (runs of 0.2 s), one worker node killed (SIGKILL of its raylet and
   workers): seconds from the kill to the last re-run result, runs lost or wrong, runs re-run;
4. sessions: --sessions live Python sessions opened across 3 nodes, each then exec'd once;
5. ray.experimental.sandbox: whether it starts here, and its startup and per-run time if it does.
Prints a Markdown table; --json writes the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # every node on 127.0.0.1
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

from dojo.cluster import SandboxFleet
from dojo.sandbox import AsyncSandbox, Program, Verdict
from dojo.sandbox.loadtest import PRINT_ONE, closed_loop, sandbox_runner

NODE = {"node_ip_address": "127.0.0.1", "num_cpus": 1}


def mem_available_gib() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 2**20
    return 0.0


async def wait_ready(fleet: SandboxFleet, n: int, timeout: float = 120) -> float:
    t0 = time.monotonic()
    while len(fleet.ready_nodes()) < n:
        if time.monotonic() - t0 > timeout:
            raise RuntimeError(f"only {len(fleet.ready_nodes())} of {n} nodes ready after {timeout}s")
        await asyncio.sleep(0.05)
    return time.monotonic() - t0


CPU_MS: dict[str, list[float]] = {}  # this process's CPU per run (the fleet's driver, or the local pool's host)


async def throughput(sandbox: Any, runs: int, concurrency: int = 32, name: str = "") -> tuple[float, int, float]:
    cpu0 = time.process_time()
    r = await closed_loop(sandbox_runner(sandbox, PRINT_ONE, "1"), concurrency, runs)
    if name:
        CPU_MS.setdefault(name, []).append((time.process_time() - cpu0) * 1000 / runs)
    return r.throughput, r.wrong, r.p50


async def overhead_and_scaling(cluster: Any, args: argparse.Namespace, out: dict[str, Any]) -> SandboxFleet:
    local = await AsyncSandbox(pool_size=args.pool_size).start()
    fleet = await SandboxFleet(cluster.address, pool_size=args.pool_size).start()
    unbatched = await SandboxFleet(cluster.address, pool_size=args.pool_size, max_batch=1).start()  # same actor
    await throughput(local, 200)
    await throughput(fleet, 200)  # warm both
    rounds: dict[str, list[float]] = {"local": [], "fleet-1": [], "fleet-1-unbatched": []}
    wrong = 0
    for _ in range(args.repeats):
        for name, sb in (("local", local), ("fleet-1", fleet), ("fleet-1-unbatched", unbatched)):
            rps, bad, _ = await throughput(sb, args.runs, name=name)
            rounds[name].append(rps)
            wrong += bad
    await local.close()
    await unbatched.close()
    for n in (2, 3):
        cluster.add_node(**NODE)
        await wait_ready(fleet, n)
        await throughput(fleet, 200)
        rounds[f"fleet-{n}"] = []
        for _ in range(args.repeats):
            rps, bad, _ = await throughput(fleet, args.runs, name=f"fleet-{n}")
            rounds[f"fleet-{n}"].append(rps)
            wrong += bad
    out["throughput"] = {k: statistics.median(v) for k, v in rounds.items()}
    out["throughput_rounds"] = rounds
    out["fleet_1_vs_local"] = out["throughput"]["fleet-1"] / out["throughput"]["local"]
    out["caller_cpu_ms_per_run"] = {k: statistics.median(v) for k, v in CPU_MS.items()}
    out["wrong"] = wrong
    return fleet


async def failover(cluster: Any, fleet: SandboxFleet, args: argparse.Namespace, out: dict[str, Any]) -> None:
    sleeper = Program(language="python", source="import time; time.sleep(0.2); print('ok')")
    times, detect, reruns, lost = [], [], [], 0
    for _ in range(args.kills):
        victim = next(iter(cluster.worker_nodes))
        before = fleet.reruns
        fleet.last_rerun_finished = None
        task = asyncio.ensure_future(fleet.run_many([sleeper] * 240))
        await asyncio.sleep(1.5)
        t_kill = time.monotonic()
        await asyncio.to_thread(cluster.remove_node, victim, False)
        results = await task
        lost += sum(1 for r in results if r.verdict is not Verdict.ACCEPTED or r.stdout != "ok\n")
        reruns.append(fleet.reruns - before)
        if fleet.last_rerun_finished is not None:
            times.append(fleet.last_rerun_finished - t_kill)
        detect += [t - t_kill for t, what in fleet.events if t >= t_kill and " dead (" in what][:1]
        cluster.add_node(**NODE)
        await wait_ready(fleet, 3)
    out["failover_seconds"] = times
    out["failover_median"] = statistics.median(times) if times else None
    out["failover_max"] = max(times) if times else None
    out["failover_detect_seconds"] = detect
    out["failover_reruns"] = reruns
    out["failover_lost_or_wrong"] = lost


async def sessions(fleet: SandboxFleet, args: argparse.Namespace, out: dict[str, Any]) -> None:
    opened: list[Any] = []
    mem0 = mem_available_gib()
    sem = asyncio.Semaphore(32)
    t0 = time.monotonic()
    stop = False

    async def open_one() -> None:
        nonlocal stop
        async with sem:
            if stop:
                return
            if mem_available_gib() < 3.0:  # keep the machine usable: stop and say how far it got
                stop = True
                return
            opened.append(await fleet.open_session("python"))

    await asyncio.gather(*(open_one() for _ in range(args.sessions)))
    open_s = time.monotonic() - t0
    mem1 = mem_available_gib()

    async def exec_one(i: int, s: Any) -> bool:
        async with sem:
            r = await s.exec(f"x = {i}\nprint(x)")
            return r.stdout == f"{i}\n"

    t1 = time.monotonic()
    ok = await asyncio.gather(*(exec_one(i, s) for i, s in enumerate(opened)))
    exec_s = time.monotonic() - t1
    per_node: dict[str, int] = {}
    for s in opened:
        per_node[s.node.short] = per_node.get(s.node.short, 0) + 1
    await asyncio.gather(*(s.close() for s in opened))
    out["sessions"] = {
        "asked": args.sessions, "live": len(opened), "exec_ok": sum(ok), "open_seconds": open_s,
        "exec_all_seconds": exec_s, "mib_per_session": (mem0 - mem1) * 1024 / max(1, len(opened)),
        "per_node": per_node, "stopped_for_memory": stop,
    }  # fmt: skip


async def ray_sandbox(out: dict[str, Any]) -> None:
    """Ray's alpha sandboxes need gVisor (runsc) and a container image."""
    if shutil.which("runsc") is None:
        out["ray_experimental_sandbox"] = (
            "does not start here: gVisor's runsc is not installed (and images need a registry)"
        )
        return
    try:
        import ray.experimental.sandbox as rs

        t0 = time.monotonic()
        box = rs.create("python:3.11-slim", timeout_seconds=60)
        startup = time.monotonic() - t0
        out["ray_experimental_sandbox"] = {"startup_seconds": startup, "handle": str(box)}
    except Exception as e:
        out["ray_experimental_sandbox"] = f"does not start here: {type(e).__name__}: {e}"[:300]


async def main(args: argparse.Namespace) -> dict[str, Any]:
    from ray.cluster_utils import Cluster

    out: dict[str, Any] = {"pool_size_per_node": args.pool_size, "cpus": os.cpu_count()}
    cluster = Cluster(initialize_head=True, head_node_args={**NODE, "include_dashboard": False})
    cluster.wait_for_nodes()
    try:
        fleet = await overhead_and_scaling(cluster, args, out)
        print("overhead and scaling done", flush=True, file=sys.stderr)
        await failover(cluster, fleet, args, out)
        print("failover done", flush=True, file=sys.stderr)
        if args.sessions:
            await sessions(fleet, args, out)
        await ray_sandbox(out)
        await fleet.close()
    finally:
        import ray

        ray.shutdown()
        cluster.shutdown()
    return out


def table(r: dict[str, Any]) -> str:
    t = r["throughput"]
    lines = [
        "| measure | value |",
        "|---|---|",
        f"| print(1) runs/s, local AsyncSandbox ({r['pool_size_per_node']} slots) | {t['local']:.0f} |",
        f"| print(1) runs/s, fleet of 1 node (same slots) | {t['fleet-1']:.0f} "
        f"({r['fleet_1_vs_local']:.0%} of local) |",
        f"| print(1) runs/s, fleet of 1 node, one actor call per run (max_batch=1) | {t['fleet-1-unbatched']:.0f} |",
        "| CPU of the calling process per run, fleet of 1 unbatched (ms) | "
        f"{r['caller_cpu_ms_per_run']['fleet-1-unbatched']:.2f} |",
        f"| print(1) runs/s, fleet of 2 / 3 nodes (one machine) | {t['fleet-2']:.0f} / {t['fleet-3']:.0f} |",
        f"| wrong outputs | {r['wrong']} |",
        "| CPU of the calling process per run, local / fleet of 1, 2, 3 (ms) | "
        + " / ".join(f"{r['caller_cpu_ms_per_run'][k]:.2f}" for k in ("local", "fleet-1", "fleet-2", "fleet-3"))
        + " |",
        f"| failover: kill to last re-run result, median / max of {len(r['failover_seconds'])} kills (s) | "
        f"{r['failover_median']:.2f} / {r['failover_max']:.2f} |",
        "| failover: kill to the node declared dead, median (s) | "
        f"{statistics.median(r['failover_detect_seconds']):.2f} |",
        f"| failover: runs re-run per kill / lost or wrong | {r['failover_reruns']} / {r['failover_lost_or_wrong']} |",
    ]
    if "sessions" in r:
        s = r["sessions"]
        lines.append(
            f"| live sessions across 3 nodes (asked {s['asked']}) | {s['live']} live, {s['exec_ok']} exec'd right; "
            f"opened in {s['open_seconds']:.0f} s, {s['mib_per_session']:.1f} MiB each |"
        )
    lines.append(f"| ray.experimental.sandbox | {r['ray_experimental_sandbox']} |")
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--runs", type=int, default=1500)
    parser.add_argument("--pool-size", type=int, default=4)
    parser.add_argument("--sessions", type=int, default=2000)
    parser.add_argument("--kills", type=int, default=3)
    parser.add_argument("--json", type=Path)
    a = parser.parse_args()
    result = asyncio.run(main(a))
    print(table(result))
    if a.json:
        a.json.write_text(json.dumps(result, indent=2))
