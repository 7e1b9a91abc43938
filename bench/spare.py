"""The spare's trade-off: `AsyncSandbox(spare=True)` (each slot forks its next run's process while
idle) against the default (the run's process is forked when its request arrives), interleaved.

    .venv/bin/python bench/spare.py [--repeats 5] [--runs 600] [--pool-size 4]

For print(1): p50 latency at concurrency 1 and throughput at concurrency 8, each the median over
--repeats interleaved rounds. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics

from dojo.sandbox import AsyncSandbox
from dojo.sandbox.loadtest import PRINT_ONE, closed_loop, sandbox_runner


async def bench(args: argparse.Namespace) -> dict[str, dict[str, float]]:
    async with (
        AsyncSandbox(pool_size=args.pool_size) as forked,
        AsyncSandbox(pool_size=args.pool_size, spare=True) as spared,
    ):
        ways = {"fork on request (default)": forked, "spare": spared}
        rounds: dict[str, dict[str, list[float]]] = {w: {"p50_ms": [], "runs_per_s_c8": []} for w in ways}
        wrong = dict.fromkeys(ways, 0)
        for _ in range(args.repeats):
            for way, sandbox in ways.items():
                runner = sandbox_runner(sandbox, PRINT_ONE, "1")
                c1 = await closed_loop(runner, 1, args.runs // 4)
                c8 = await closed_loop(runner, 8, args.runs)
                rounds[way]["p50_ms"].append(c1.p50 * 1000)
                rounds[way]["runs_per_s_c8"].append(c8.throughput)
                wrong[way] += c1.wrong + c8.wrong
    return {w: {**{k: statistics.median(v) for k, v in f.items()}, "wrong": wrong[w]} for w, f in rounds.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5, help="rounds; each figure is the median")
    parser.add_argument("--runs", type=int, default=600, help="runs per throughput measurement")
    parser.add_argument("--pool-size", type=int, default=4, help="warm slots per sandbox")
    args = parser.parse_args()
    if args.repeats < 1 or args.runs < 20 or args.pool_size < 1:
        parser.error("--repeats and --pool-size must be >= 1, --runs >= 20")
    results = asyncio.run(bench(args))
    print("| print(1) | p50 ms (c=1) | runs/s (c=8) | wrong |")
    print("|---|---|---|---|")
    for way, f in results.items():
        print(f"| {way} | {f['p50_ms']:.2f} | {f['runs_per_s_c8']:.0f} | {f['wrong']:.0f} |")


if __name__ == "__main__":
    main()
