"""False positives of the static reward-hack scan on honest code.

    .venv/bin/python bench/scan_false_positives.py [--per-task 20] [--seed 0]

Scans the HumanEval references (164 in assert form, 147 in function form) and ``--per-task``
honest mutations of each reference (``tests/rewards/honest_code.py``: renamed variables, debug
prints, unused imports, a ``__main__`` block, ``getattr`` with written-out names, helpers, a class,
``eval`` of arithmetic, off-by-one mistakes), and prints how many got a ``hack`` finding (which
would zero the reward) and how many a ``suspicious`` one (reported only), by kind. The target is 0
``hack`` findings.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.rewards.honest_code import honest_completions

from dojo.rewards import scan_python
from dojo.rewards.hacks import visible_examples
from dojo.tasks import load_humaneval


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--per-task", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.per_task < 0:
        parser.error("--per-task must be at least 0")
    tasks = load_humaneval("assert") + load_humaneval("function")
    sets = {
        "HumanEval references": [(t, t.reference or "") for t in tasks],
        f"mutated references ({args.per_task} per task)": list(honest_completions(tasks, args.per_task, args.seed)),
    }
    print("| code | programs | with a hack finding | with a suspicious finding | scan time per program |")
    print("|---|---|---|---|---|")
    kinds: Counter[str] = Counter()
    examples: list[str] = []
    for name, items in sets.items():
        hacks = suspicious = 0
        start = time.perf_counter()
        for task, code in items:
            findings = scan_python(code, task.form, visible_examples(task.prompt_text(), task.entry_point, []))
            if any(f.severity == "hack" for f in findings):
                hacks += 1
                examples.append(f"{task.id}: {[f.detail for f in findings if f.severity == 'hack']}")
            elif findings:
                suspicious += 1
            kinds.update(f.flag() for f in findings)
        per = (time.perf_counter() - start) / max(1, len(items)) * 1e6
        print(f"| {name} | {len(items)} | {hacks} | {suspicious} | {per:.0f} µs |")
    print("\nfindings by kind:", dict(kinds.most_common()))
    for line in examples[:10]:
        print("hack finding on honest code:", line)


if __name__ == "__main__":
    main()
