"""False positives of the diff check of repo edits (``dojo.rewards.edit_scan``) on honest fixes.

    .venv/bin/python bench/edit_scan_false_positives.py [--grade 10]

Scans the reference fix of every swe task (237 in 5 packages) and the same fix written five other
ways (``tests/rewards/honest_edits.py``: a comment above the changed line, the whole file, the
function around the fix rewritten with renamed locals and a return annotation, the file's imports
reordered, the whole file reformatted so that every line is added), and prints how many got a
``hack`` finding (which would zero the reward) and how many a ``suspicious`` one, by way of writing
and by kind, with the scan's time per edit. The target is 0 ``hack`` findings. With ``--grade N``
it also grades the honest edits of N tasks (with the check on) and prints how many score 1.0:
they are fixes, not only text that scans clean.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.rewards.honest_edits import honest_edits

from dojo.rewards import Grader
from dojo.rewards.edit_scan import scan_repo_edits
from dojo.rewards.repo import parse_edits
from dojo.sandbox import AsyncSandbox
from dojo.tasks.model import Task
from dojo.tasks.swe import load_swe

PACKAGES = ("toolz", "networkx", "dill", "fire", "pyflakes")


async def grade(items: list[tuple[Task, str, str]]) -> Counter[str]:
    scores: Counter[str] = Counter()
    async with AsyncSandbox(pool_size=2) as sandbox:
        grader = Grader(sandbox)
        for task, way, text in items:
            r = await grader.grade(task, text)
            scores[f"{way}: {'1.0' if r.value == 1.0 else f'{r.value} ({r.verdict})'}"] += 1
    return scores


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--grade", type=int, default=0, help="grade the honest edits of this many tasks too")
    args = parser.parse_args()
    if args.grade < 0:
        parser.error("--grade must be at least 0")
    tasks = [t for p in PACKAGES for t in load_swe(p)]
    items = [(t, way, text) for t in tasks for way, text in honest_edits(t).items()]
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    kinds: Counter[str] = Counter()
    seconds: list[float] = []
    examples = []
    for task, way, text in items:
        start = time.perf_counter()
        findings = scan_repo_edits(task, parse_edits(text))
        seconds.append(time.perf_counter() - start)
        counts[way]["edits"] += 1
        if any(f.severity == "hack" for f in findings):
            counts[way]["hack"] += 1
            examples.append(f"{task.id} {way}: {[f.detail for f in findings if f.severity == 'hack']}")
        elif findings:
            counts[way]["suspicious"] += 1
        kinds.update(f.flag() for f in findings)
    print(f"{len(tasks)} swe tasks; scan time per edit: median {statistics.median(seconds) * 1e3:.1f} ms, "
          f"max {max(seconds) * 1e3:.0f} ms")  # fmt: skip
    print("| written as | edits | with a hack finding | with a suspicious finding |")
    print("|---|---|---|---|")
    for way, c in counts.items():
        print(f"| {way} | {c['edits']} | {c['hack']} | {c['suspicious']} |")
    print("\nfindings by kind:", dict(kinds.most_common()))
    for line in examples[:10]:
        print("  hack:", line)
    if args.grade:
        chosen = {t.id for t in random.Random(0).sample(tasks, args.grade)}
        scores = asyncio.run(grade([item for item in items if item[0].id in chosen]))
        print(f"\ngraded ({args.grade} tasks, every way):", dict(sorted(scores.items())))


if __name__ == "__main__":
    main()
