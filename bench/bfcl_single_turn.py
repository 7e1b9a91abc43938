"""How often dojo's grading of BFCL's ten AST-checked single-turn categories agrees with BFCL's own
``ast_checker``, in both of dojo's rules (``bfcl`` and ``strict``, ``dojo.rewards.calls``).

Every task's candidates are made from its possible answer (``tests/tasks/bfcl_parity.py``: the
gold, each other allowed value, ``""`` or ``[]`` for an optional argument, a wrong value, type
changes, arguments left out or added, a wrong name, parallel calls reversed, dropped or doubled) and
graded by dojo (from ``<tool_call>`` text, as a policy writes it) and by BFCL's checker in this
process. Prints, per category, the candidates, how many each of dojo's rules grades as BFCL does,
the strict rule behind each difference, and candidates on which BFCL's checker raised.

    .venv/bin/python bench/bfcl_single_turn.py [--n TASKS_PER_CATEGORY] [--categories simple_python,...]
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.tasks.bfcl_parity import AST_CATEGORIES, bfcl_verdict, candidates, dojo_verdict, strict_rule

from dojo.tasks.bfcl import load_bfcl


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=None, help="tasks per category (a seeded sample; default all)")
    ap.add_argument("--categories", default=",".join(AST_CATEGORIES))
    args = ap.parse_args()
    totals: collections.Counter[str] = collections.Counter()
    rules: collections.Counter[str] = collections.Counter()
    examples: dict[str, str] = {}
    start = time.perf_counter()
    for category in args.categories.split(","):
        tasks = load_bfcl(category, n=args.n)
        count: collections.Counter[str] = collections.Counter()
        differs: collections.Counter[str] = collections.Counter()
        disagreements = []
        t0 = time.perf_counter()
        for task in tasks:
            for kind, calls, model in candidates(task):
                count["candidates"] += 1
                theirs = bfcl_verdict(task, calls, model)
                ours, why = dojo_verdict(task, calls, "bfcl")
                strict, strict_why = dojo_verdict(task, calls, "strict")
                if isinstance(theirs, str):  # BFCL's checker raised: no verdict to compare
                    count["bfcl_raised"] += 1
                    continue
                count["bfcl_valid"] += theirs
                count["bfcl_agree"] += ours == theirs
                count["strict_agree"] += strict == theirs
                if ours != theirs:
                    disagreements.append(f"  {task.id} {kind}: dojo {ours} ({why}), BFCL {theirs}: {calls}")
                if strict != theirs:
                    rule = strict_rule(strict_why)
                    rules[rule] += 1
                    differs[rule] += 1
                    examples.setdefault(rule, f"{task.id} {kind}: {calls}")
        seconds = time.perf_counter() - t0
        n = count["candidates"] - count["bfcl_raised"]
        print(f"{category}: {len(tasks)} tasks, {count['candidates']} candidates ({count['bfcl_valid']} BFCL-valid); "
              f"bfcl rules agree {count['bfcl_agree']}/{n} ({count['bfcl_agree'] / max(n, 1):.2%}), strict "
              f"{count['strict_agree']}/{n} ({count['strict_agree'] / max(n, 1):.2%}); BFCL raised on "
              f"{count['bfcl_raised']}; {seconds:.1f} s")  # fmt: skip
        print(f"  strict differs by: {', '.join(f'{r} {k}' for r, k in differs.most_common()) or 'nothing'}")
        if disagreements:
            print("\n".join(disagreements[:10]))
        totals.update(count)
    n = totals["candidates"] - totals["bfcl_raised"]
    print(f"all: {totals['candidates']} candidates; bfcl rules agree {totals['bfcl_agree']}/{n}, strict "
          f"{totals['strict_agree']}/{n}; {time.perf_counter() - start:.1f} s")  # fmt: skip
    for rule, k in rules.most_common():
        print(f"  strict differs by rule {rule}: {k}, e.g. {examples[rule][:300]}")


if __name__ == "__main__":
    main()
