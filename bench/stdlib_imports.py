"""What a standard-library import outside the default slots' preload costs each run that makes it.

    .venv/bin/python bench/stdlib_imports.py [--repeats 3] [--runs 400] [--pool-size 4]

Each round runs, all at once through one sandbox pool, ``--runs`` runs of ``import X`` then
``print(1)`` for each module below, and as many of ``print(1)`` alone (checking each one printed
1). It prints runs per second and the machine's busy CPU per run (``/proc/stat``), medians over the
rounds, and what the import adds to a ``print(1)`` run. The modules the default slots import once
for every run are ``dojo.sandbox.guest.preload.PYTHON_PRELOAD``; an environment can preload others
(docs/environments.md).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics

from dojo.sandbox import AsyncSandbox, Verdict
from failures import plain_round  # (bench/failures.py: a script's own directory is on sys.path)

MODULES = ("json", "decimal", "datetime", "fractions", "hashlib", "statistics", "dataclasses")
ALONE = "print(1) alone"


async def main(repeats: int, runs: int, pool_size: int) -> None:
    sources = {ALONE: "print(1)\n", **{name: f"import {name}\nprint(1)\n" for name in MODULES}}
    rows: dict[str, list[tuple[float, float]]] = {name: [] for name in sources}
    async with AsyncSandbox(pool_size=pool_size) as sandbox:
        for round_ in range(repeats + 1):  # the first round warms the slots
            for name, source in sources.items():
                figures = await plain_round(sandbox, source, Verdict.ACCEPTED, "1\n", runs)
                if round_:
                    rows[name].append(figures)
    medians = {name: (statistics.median(r for r, _ in got), statistics.median(c for _, c in got))
               for name, got in rows.items()}  # fmt: skip
    print(f"pool {pool_size}, {repeats} rounds, {runs} runs of each program a round (medians)\n")
    print("| program | runs/s | machine CPU ms a run | the import adds |")
    print("|---|---|---|---|")
    for name, (rate, cpu) in medians.items():
        added = "" if name == ALONE else f"{cpu - medians[ALONE][1]:+.1f} ms"
        print(f"| {'print(1)' if name == ALONE else f'import {name}; print(1)'} | {rate:,.0f} | {cpu:.2f} | {added} |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds (after one warm-up round)")
    parser.add_argument("--runs", type=int, default=400, help="runs of each program a round")
    parser.add_argument("--pool-size", type=int, default=4, help="sandbox slots")
    args = parser.parse_args()
    if args.repeats < 1 or args.runs < 1 or args.pool_size < 1:
        parser.error("--repeats, --runs and --pool-size must each be 1 or more")
    asyncio.run(main(args.repeats, args.runs, args.pool_size))
