"""Sandbox benchmark: dojo's warm slots against a fresh `python3 -I -S -c` per run, in one process.

    .venv/bin/python bench/sandbox.py [--repeats 3] [--runs 600] [--pool-size N] [--json out.json]

For `print(1)` and a HumanEval-style function with 5 asserts it measures, per way of running
(dojo, dojo with its syscall filter off to show the filter's cost, dojo without its forker to
show what the forker saves, and naive): p50/p99 latency at
concurrency 1, throughput at concurrency 2/8/32, and wrong outputs (a run that did not finish
Accepted with the right stdout). Each figure is the median over --repeats rounds; the rounds
interleave the ways so machine noise hits all alike. It also reports the idle
memory (PSS) of each warm slot. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

from dojo.sandbox import AsyncSandbox
from dojo.sandbox.languages import default_python
from dojo.sandbox.loadtest import WORKLOADS, closed_loop, naive_runner, sandbox_runner

CONCURRENCY = (2, 8, 32)


def pss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1])
    return 0


def tree(pid: int) -> list[int]:
    """``pid`` and all its descendants."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return [pid, *(p for c in children for p in tree(int(c)))]


def slot_memory(sandbox: AsyncSandbox) -> dict[str, float]:
    """PSS of each idle slot: the tiny `unshare` process that holds it, its zygote and its forker."""
    totals = []
    for slot in sandbox.pool.slots():
        assert slot.pid is not None
        totals.append(sum(pss_kib(p) for p in tree(slot.pid)))
    return {"slots": len(totals), "median_pss_mib": statistics.median(totals) / 1024, "max_pss_mib": max(totals) / 1024}


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    python = default_python()
    results: dict[str, Any] = {"machine": {"cpus": os.cpu_count(), "python": python}, "workloads": {}}
    async with (
        AsyncSandbox(pool_size=args.pool_size) as sandbox,
        AsyncSandbox(pool_size=args.pool_size, syscall_filter=False) as unfiltered,
        AsyncSandbox(pool_size=args.pool_size, forker=False) as unforked,
    ):
        await asyncio.sleep(0.5)
        results["slot_memory"] = slot_memory(sandbox)
        results["pool_size"] = sandbox.pool_size
        for name, (source, expected) in WORKLOADS.items():
            ways = {
                "dojo": sandbox_runner(sandbox, source, expected),
                "dojo, no syscall filter": sandbox_runner(unfiltered, source, expected),
                "dojo, no forker": sandbox_runner(unforked, source, expected),
                "naive": naive_runner(python, source, expected),
            }
            rounds: dict[str, dict[str, list[float]]] = {w: {} for w in ways}
            wrong = {w: 0 for w in ways}
            await closed_loop(ways["dojo"], 4, 50)  # warm-up
            await closed_loop(ways["dojo, no syscall filter"], 4, 50)
            await closed_loop(ways["dojo, no forker"], 4, 50)
            for _ in range(args.repeats):
                for way, runner in ways.items():
                    c1 = await closed_loop(runner, 1, args.runs // 3)
                    rounds[way].setdefault("p50_ms", []).append(c1.p50 * 1000)
                    rounds[way].setdefault("p99_ms", []).append(c1.percentile(0.99) * 1000)
                    wrong[way] += c1.wrong
                    for c in CONCURRENCY:
                        load = await closed_loop(runner, c, args.runs)
                        rounds[way].setdefault(f"runs_per_s_c{c}", []).append(load.throughput)
                        wrong[way] += load.wrong
            results["workloads"][name] = {
                way: {**{k: statistics.median(v) for k, v in figs.items()}, "wrong": wrong[way]}
                for way, figs in rounds.items()
            }
    return results


def table(results: dict[str, Any]) -> str:
    cols = ["p50_ms", "p99_ms", *(f"runs_per_s_c{c}" for c in CONCURRENCY), "wrong"]
    lines = [
        "| workload | way | " + " | ".join(cols) + " |",
        "|---|---|" + "---|" * len(cols),
    ]
    for name, ways in results["workloads"].items():
        for way, figs in ways.items():
            cells = [f"{figs[c]:.2f}" if "ms" in c else f"{figs[c]:.0f}" for c in cols]
            lines.append(f"| {name} | {way} | " + " | ".join(cells) + " |")
        ratio = ways["dojo"]["runs_per_s_c8"] / max(ways["naive"]["runs_per_s_c8"], 1e-9)
        lines.append(f"| {name} | dojo / naive at c=8 | | | | {ratio:.1f}x | | |")
        cost = ways["dojo"]["p50_ms"] - ways["dojo, no syscall filter"]["p50_ms"]
        lines.append(f"| {name} | syscall filter's cost at p50 | {cost:+.3f} ms | | | | | |")
        gain = ways["dojo"]["runs_per_s_c8"] / max(ways["dojo, no forker"]["runs_per_s_c8"], 1e-9)
        lines.append(f"| {name} | with / without the forker at c=8 | | | | {gain:.2f}x | | |")
    mem = results["slot_memory"]
    lines.append("")
    lines.append(
        f"Idle memory per warm slot (PSS, holder + zygote + forker): median {mem['median_pss_mib']:.1f} MiB, "
        f"max {mem['max_pss_mib']:.1f} MiB over {mem['slots']} slots (pool size {results['pool_size']})."
    )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3, help="rounds; each figure is the median")
    parser.add_argument("--runs", type=int, default=600, help="runs per throughput measurement")
    parser.add_argument("--pool-size", type=int, default=None, help="warm slots (default: 2 per core)")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures as JSON here")
    args = parser.parse_args()
    if args.repeats < 1 or args.runs < 10:
        parser.error("--repeats must be >= 1 and --runs >= 10")
    start = time.time()
    results = asyncio.run(bench(args))
    results["seconds"] = round(time.time() - start, 1)
    print(table(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
