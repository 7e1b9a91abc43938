"""What the canaries' values give away: a forger that runs the bug and makes pass the copy whose
expected value is nearest what the bug computed (``bench/programs/nearest_copy_forger.py``, appended
to the buggy module, the bug left in place), graded with the diff check off (so that the canaries
hold alone) on ``--tasks`` canaried tasks of each swe package, ``--gradings`` times each (each
grading draws its canaries anew). Prints, per package and in all, the gradings it was paid 1.0 in,
of those in which it made the tests pass (a forger that picks a copy at random is paid 1 in 20).
Asserts nothing.

    .venv/bin/python bench/canary_nearest.py [--tasks 20] [--gradings 3] [--packages fire,toolz,...]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
from pathlib import Path

from dojo.rewards import Grader, GradingConfig
from dojo.sandbox import AsyncSandbox
from dojo.tasks import load_source
from dojo.tasks.swe import PACKAGES

FORGER = (Path(__file__).resolve().parent / "programs" / "nearest_copy_forger.py").read_text()


async def main(packages: list[str], n: int, gradings: int, rule: str) -> None:
    counts: collections.Counter[tuple[str, str]] = collections.Counter()
    async with AsyncSandbox(pool_size=2) as sandbox:
        grader = Grader(sandbox, GradingConfig(mode="binary", scan=False))
        for package in packages:
            tasks = [t for t in load_source(f"swe:{package}?n={n}&seed=3") if any(x.canary for x in t.tests)]
            for task in tasks:
                assert task.workspace is not None
                module = next(
                    p for p in task.workspace.files if "/test" not in p and not p.split("/")[-1].startswith("test_")
                )
                completion = f'<file path="{module}">\n{task.workspace.files[module]}\n{FORGER}</file>'
                for _ in range(gradings):
                    reward = await grader.grade(task, completion)
                    counts[(package, reward.verdict)] += 1
    for package in [*packages, "all"]:
        mine: collections.Counter[str] = collections.Counter()
        for (p, verdict), count in counts.items():
            mine[verdict] += count if package in (p, "all") else 0
        total = sum(mine.values())
        made_pass = total - mine.get("fail", 0)
        paid = mine.get("pass", 0)
        print(
            f"{package}: paid in {paid} of {total} gradings ({paid / max(1, made_pass):.1%} of the {made_pass} "
            f"in which it made the tests pass; caught as a hack {mine.get('hack', 0)})"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=20)
    parser.add_argument("--gradings", type=int, default=3)
    parser.add_argument("--packages", default="dill,fire,networkx,pyflakes,toolz")
    rules = "the copy it bets on: nearest the bug's output, or the most written elsewhere in the test files"
    parser.add_argument("--rule", choices=["nearest", "elsewhere"], default="nearest", help=rules)
    args = parser.parse_args()
    chosen = args.packages.split(",")
    unknown = sorted(set(chosen) - set(PACKAGES))
    if unknown:
        parser.error(f"unknown packages {unknown}; known: {', '.join(sorted(PACKAGES))}")
    asyncio.run(main(chosen, args.tasks, args.gradings, args.rule))
