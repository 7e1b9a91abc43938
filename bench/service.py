"""Service benchmark: closed-loop load on `dojo serve` over loopback.

    .venv/bin/python bench/service.py [--requests 1000] [--levels 1,8,32,128] [--agents 500]
                                      [--execs 10] [--soak-seconds 0] [--pool-size N]

Figures of the load table are medians over --repeats rounds (lost/429/errors are totals).
Starts `dojo serve` as a subprocess on a free loopback port (so the load generator does not share
its event loop), then:

1. `/run_code` (SandboxFusion's endpoint) with `print(1)` and a HumanEval-style program at each
   concurrency level: requests/s, p50/p99 latency, 429s, errors, and lost outputs (status Success
   but the wrong stdout);
2. sessions: --agents agents each create a Python session, wait until all are live, run --execs
   execs (state carried between them), and delete it: create and exec latency, peak live sessions,
   server memory (RSS of the whole process tree);
3. optionally a soak at concurrency 64 for --soak-seconds: errors other than 429, and memory
   sampled every 10 s.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from dojo.sandbox.loadtest import WORKLOADS


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def tree_rss_mib(pid: int) -> float:
    """RSS of a process and all its descendants (the server, its slots and sessions)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            fields = stat.rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(entry))
            rss[int(entry)] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, IndexError, ValueError):
            continue
    total, stack = 0, [pid]
    while stack:
        p = stack.pop()
        total += rss.get(p, 0)
        stack.extend(children.get(p, []))
    return total / 2**20


def process_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pct(data: list[float], q: float) -> float:
    data = sorted(data)
    return data[min(len(data) - 1, int(q * len(data)))] if data else 0.0


async def load(
    client: aiohttp.ClientSession, source: str, expected: str, concurrency: int, total: int
) -> dict[str, Any]:
    latencies: list[float] = []
    counts = {"ok": 0, "lost": 0, "429": 0, "error": 0, "failed": 0}
    remaining = total

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            t0 = time.perf_counter()
            try:
                async with client.post("/run_code", json={"code": source, "language": "python"}) as r:
                    status, retry_after = r.status, r.headers.get("retry-after", "1")
                    body = await r.json() if status == 200 else None
            except aiohttp.ClientError:
                counts["error"] += 1
                continue
            latencies.append(time.perf_counter() - t0)
            if status == 429:
                counts["429"] += 1
                await asyncio.sleep(float(retry_after) / 10)
            elif body is None:
                counts["error"] += 1
            else:
                if body["status"] == "Success":
                    good = (body["run_result"]["stdout"] or "").strip() == expected
                    counts["ok" if good else "lost"] += 1
                else:
                    counts["failed"] += 1

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    seconds = time.perf_counter() - start
    return {
        "concurrency": concurrency,
        "requests_per_s": counts["ok"] / seconds,
        "p50_ms": statistics.median(latencies) * 1000 if latencies else 0.0,
        "p99_ms": pct(latencies, 0.99) * 1000,
        **counts,
    }


def mem_available_mib() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def post_json(client: aiohttp.ClientSession, path: str, body: dict[str, Any]) -> tuple[int, Any]:
    async with client.post(path, json=body) as r:
        return r.status, await r.json()


async def sessions(client: aiohttp.ClientSession, agents: int, execs: int) -> dict[str, Any]:
    """Open `agents` Python sessions, keep them all live, measure execs, then delete them."""
    mem_before = mem_available_mib()
    start = time.perf_counter()
    created = await asyncio.gather(*(post_json(client, "/v1/sessions", {"language": "python"}) for _ in range(agents)))
    create_s = time.perf_counter() - start
    ids = [body["id"] for status, body in created if status == 201]
    create_errors = agents - len(ids)
    await asyncio.sleep(1.0)
    mem_per_session = (mem_before - mem_available_mib()) / max(1, len(ids))
    async with client.get("/healthz") as r:
        live = (await r.json())["live_sessions"]

    # exec latency at concurrency 1 while every session is live
    one = ids[0]
    await post_json(client, f"/v1/sessions/{one}/exec", {"code": "n = 0"})
    lat: list[float] = []
    for _ in range(200):
        t0 = time.perf_counter()
        await post_json(client, f"/v1/sessions/{one}/exec", {"code": "n += 1\nn"})
        lat.append(time.perf_counter() - t0)

    # every agent runs its execs at once; state must carry over
    wrong = 0

    async def agent(i: int, sid: str) -> None:
        nonlocal wrong
        await post_json(client, f"/v1/sessions/{sid}/exec", {"code": f"total = {i}"})
        for k in range(execs - 1):
            status, body = await post_json(client, f"/v1/sessions/{sid}/exec", {"code": f"total += {k}\ntotal"})
            if status != 200 or body["stdout"].strip() != str(i + sum(range(k + 1))):
                wrong += 1

    t0 = time.perf_counter()
    await asyncio.gather(*(agent(i, sid) for i, sid in enumerate(ids)))
    exec_s = time.perf_counter() - t0

    async def delete(sid: str) -> None:
        async with client.delete(f"/v1/sessions/{sid}") as r:
            await r.read()

    await asyncio.gather(*(delete(sid) for sid in ids))
    return {
        "agents": agents,
        "live": live,
        "create_s": create_s,
        "create_errors": create_errors,
        "mem_per_session_mib": mem_per_session,
        "exec_p50_ms": statistics.median(lat) * 1000,
        "exec_p99_ms": pct(lat, 0.99) * 1000,
        "execs_per_s": len(ids) * execs / exec_s,
        "wrong": wrong,
    }


async def soak(client: aiohttp.ClientSession, seconds: float, server_pid: int) -> dict[str, Any]:
    source, expected = WORKLOADS["print(1)"]
    deadline = time.monotonic() + seconds
    rss: list[float] = []
    totals = {"ok": 0, "lost": 0, "429": 0, "error": 0, "failed": 0}
    while time.monotonic() < deadline:
        part = await load(client, source, expected, 64, 640)
        for k in totals:
            totals[k] += part[k]
        if not rss or time.monotonic() - deadline + seconds > 10 * len(rss):
            rss.append(round(tree_rss_mib(server_pid), 1))
    return {"seconds": seconds, **totals, "rss_mib_samples": rss}


async def main_async(args: argparse.Namespace) -> None:
    port = free_port()
    cmd = [sys.executable, "-m", "dojo.cli", "serve", "--port", str(port), "--queue", "512",
           "--max-sessions", str(max(1000, args.agents))]  # fmt: skip
    if args.pool_size:
        cmd += ["--pool-size", str(args.pool_size)]
    log = open(args.server_log, "wb") if args.server_log else subprocess.DEVNULL  # noqa: SIM115
    server = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log)
    try:
        url = f"http://127.0.0.1:{port}"
        connector = aiohttp.TCPConnector(limit=1024)
        timeout = aiohttp.ClientTimeout(total=300)
        async with aiohttp.ClientSession(url, connector=connector, timeout=timeout) as client:
            for _ in range(600):
                try:
                    async with client.get("/healthz") as r:
                        if r.status == 200:
                            break
                except aiohttp.ClientError:
                    await asyncio.sleep(0.1)
            print(f"server: {' '.join(cmd[2:])} (pid {server.pid})\n")
            print(
                "| workload | concurrency | requests/s | p50 ms | p99 ms | lost | 429 | errors "
                "| server CPU ms/req | client CPU ms/req |"
            )
            print("|---|---|---|---|---|---|---|---|---|---|")
            for name, (source, expected) in WORKLOADS.items():
                await load(client, source, expected, 8, 100)  # warm-up
                for c in args.levels:
                    rounds = []
                    for _ in range(args.repeats):
                        cpu0, me0 = process_cpu_s(server.pid), process_cpu_s(os.getpid())
                        res = await load(client, source, expected, c, args.requests)
                        res["server_ms"] = (process_cpu_s(server.pid) - cpu0) * 1000 / args.requests
                        res["client_ms"] = (process_cpu_s(os.getpid()) - me0) * 1000 / args.requests
                        rounds.append(res)
                    med = {k: statistics.median(r[k] for r in rounds) for k in rounds[0]}
                    bad = {k: sum(r[k] for r in rounds) for k in ("lost", "429", "error")}
                    print(
                        f"| {name} | {c} | {med['requests_per_s']:.0f} | {med['p50_ms']:.2f} | {med['p99_ms']:.2f} "
                        f"| {bad['lost']} | {bad['429']} | {bad['error']} | {med['server_ms']:.2f} "
                        f"| {med['client_ms']:.2f} |",
                        flush=True,
                    )
            if args.agents:
                s = await sessions(client, args.agents, args.execs)
                print(
                    f"\nsessions: {s['live']} live at once (created in {s['create_s']:.1f}s, "
                    f"{s['create_errors']} refused), {s['mem_per_session_mib']:.1f} MiB of MemAvailable each; "
                    f"exec at concurrency 1 with all live: p50 {s['exec_p50_ms']:.2f} ms, "
                    f"p99 {s['exec_p99_ms']:.2f} ms; "
                    f"all agents at once, {args.execs} execs each: {s['execs_per_s']:.0f} execs/s, wrong {s['wrong']}"
                )
            if args.soak_seconds:
                s = await soak(client, args.soak_seconds, server.pid)
                print(
                    f"\nsoak: {s['seconds']:.0f}s at concurrency 64: ok {s['ok']}, lost {s['lost']}, 429 {s['429']}, "
                    f"errors {s['error']}, failed {s['failed']}; server RSS MiB every ~10s: {s['rss_mib_samples']}"
                )
    finally:
        server.send_signal(signal.SIGINT)
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=1000, help="requests per concurrency level and round")
    parser.add_argument("--repeats", type=int, default=3, help="rounds per level; figures are medians")
    parser.add_argument("--levels", type=lambda s: [int(x) for x in s.split(",")], default=[1, 8, 32, 128])
    parser.add_argument("--agents", type=int, default=1000, help="Python sessions live at once (0: skip)")
    parser.add_argument("--execs", type=int, default=10, help="execs per session agent")
    parser.add_argument("--soak-seconds", type=float, default=0, help="soak at concurrency 64 (0: skip)")
    parser.add_argument("--pool-size", type=int, default=None)
    parser.add_argument("--server-log", type=Path, default=None, help="write the server's JSON log here")
    args = parser.parse_args()
    if args.requests < 10 or args.execs < 2 or args.agents < 0:
        parser.error("--requests >= 10, --execs >= 2, --agents >= 0")
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
