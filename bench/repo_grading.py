"""What grading a repo task costs: the reference fix and the tree as given (a wrong candidate) of
``swe:`` tasks, one at a time, median of several rounds.

    .venv/bin/python bench/repo_grading.py --package toolz --tasks 10 --rounds 3

Prints, per package, the median seconds of one grading of each kind and how many tasks are graded
with canaries (dojo.tasks.canaries). Run with nothing else on the machine; compare two versions as
ratios measured the same day."""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from dojo.rewards import Grader
from dojo.rewards.repo import format_edits
from dojo.sandbox import AsyncSandbox
from dojo.tasks.swe import load_swe


async def measure(packages: list[str], tasks: int, rounds: int) -> None:
    async with AsyncSandbox(pool_size=2) as sandbox:
        grader = Grader(sandbox)
        for package in packages:
            chosen = load_swe(package, n=tasks, seed=0)
            canaried = sum(any(getattr(t, "canary", None) for t in task.tests) for task in chosen)
            times: dict[str, list[float]] = {"reference": [], "as given": []}
            for _ in range(rounds):
                for task in chosen:
                    assert task.workspace is not None and task.reference is not None
                    given = format_edits(dict(list(task.workspace.files.items())[:1]))
                    for kind, completion in (("reference", task.reference), ("as given", given)):
                        t0 = time.perf_counter()
                        reward = await grader.grade(task, completion)
                        times[kind].append(time.perf_counter() - t0)
                        want = 1.0 if kind == "reference" else 0.0
                        if reward.value != want:
                            print(f"  {task.id} {kind}: {reward.value} {reward.verdict} {reward.error}")
            medians = {k: statistics.median(v) for k, v in times.items()}
            totals = {k: sum(v) / rounds for k, v in times.items()}
            print(
                f"{package}: {len(chosen)} tasks ({canaried} with canaries), median s per grading: "
                f"reference {medians['reference']:.3f}, as given {medians['as given']:.3f}; "
                f"s for all tasks once: reference {totals['reference']:.1f}, as given {totals['as given']:.1f}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--package", action="append", help="swe package (repeatable; default: all recorded)")
    parser.add_argument("--tasks", type=int, default=10, help="Tasks per package.")
    parser.add_argument("--rounds", type=int, default=3, help="Times each task is graded.")
    args = parser.parse_args()
    packages = args.package or ["toolz", "networkx", "dill", "fire", "pyflakes"]
    asyncio.run(measure(packages, args.tasks, args.rounds))


if __name__ == "__main__":
    main()
