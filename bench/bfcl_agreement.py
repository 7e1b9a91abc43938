"""How often dojo's grading of BFCL's multi-turn tasks agrees with BFCL's own checker.

For every task of the four multi-turn categories, a few candidates are made from the gold calls
(the gold itself; the last call of the last turn dropped; the first call dropped; each turn's calls
twice; each turn's calls reversed; each turn's calls given one turn late) and graded twice: by
``dojo.rewards`` (the calls run in the sandbox, the state compared outside) and by
``bfcl_eval``'s ``multi_turn_checker`` in this process (the candidates are built from the gold
calls here, never by a model). Prints the agreement per category and the disagreements.

    .venv/bin/python bench/bfcl_agreement.py [--n 200] [--categories multi_turn_base,...]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import time
from typing import Any

from dojo.rewards.graders import Grader
from dojo.sandbox import AsyncSandbox
from dojo.tasks.bfcl_multi_turn import KINDS, load_bfcl_multi_turn
from dojo.tasks.gold_calls import gold_turns, keyword_arguments
from dojo.tasks.model import Task

Turns = list[list[dict[str, Any]]]


def variants(task: Task) -> dict[str, Turns]:
    gold = [[{"name": c["name"], "arguments": keyword_arguments(task, c)} for c in turn] for turn in gold_turns(task)]
    out: dict[str, Turns] = {"gold": gold}
    last = max((i for i, t in enumerate(gold) if t), default=None)
    if last is not None:
        out["drop_last"] = [t[:-1] if i == last else t for i, t in enumerate(gold)]
    first = min((i for i, t in enumerate(gold) if t), default=None)
    if first is not None:
        out["drop_first"] = [t[1:] if i == first else t for i, t in enumerate(gold)]
    out["twice"] = [t + t for t in gold]
    out["reversed"] = [list(reversed(t)) for t in gold]
    out["late"] = [[], *gold[:-1]]
    return out


def call_text(call: dict[str, Any]) -> str:
    return f"{call['name']}({', '.join(f'{k}={v!r}' for k, v in call['arguments'].items())})"


def bfcl_verdict(task: Task, turns: Turns, tag: str) -> bool:
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker  # type: ignore[import-untyped]

    assert task.api is not None
    row_id = task.id.removeprefix("bfcl:")
    entry = {"id": row_id, "initial_config": task.api.config, "involved_classes": task.api.classes}
    decoded = [[[call_text(c) for c in turn]] if turn else [] for turn in turns]
    gold = task.tests[0].expected["turns"]
    category = row_id.rsplit("_", 1)[0]
    return bool(multi_turn_checker(decoded, gold, entry, category, f"agreement_{tag}")["valid"])


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=200, help="tasks per category (a seeded sample)")
    ap.add_argument("--categories", default=",".join(KINDS))
    args = ap.parse_args()
    async with AsyncSandbox() as sandbox:
        grader = Grader(sandbox)
        for kind in args.categories.split(","):
            tasks = load_bfcl_multi_turn(kind, n=args.n)
            jobs = [(t, name, turns) for t in tasks for name, turns in variants(t).items()]
            t0 = time.perf_counter()
            rewards = await asyncio.gather(*(grader.grade(t, json.dumps({"turns": [[c] for c in turns]}))
                                             for t, _, turns in jobs))  # fmt: skip
            seconds = time.perf_counter() - t0
            agree, disagreements, passed = 0, [], collections.Counter[str]()
            for (t, name, turns), r in zip(jobs, rewards, strict=True):
                ours = r.verdict == "pass"
                theirs = bfcl_verdict(t, turns, f"{name}_{kind}")
                agree += ours == theirs
                passed[name] += ours
                if ours != theirs:
                    disagreements.append(f"  {t.id} {name}: dojo {r.verdict}, bfcl {'valid' if theirs else 'invalid'}: "
                                         f"{[c.detail for c in r.cases if not c.passed][:1]}")  # fmt: skip
            print(f"{kind}: {agree}/{len(jobs)} candidates graded alike ({agree / len(jobs):.1%}); "
                  f"dojo graded them in {seconds:.1f} s")  # fmt: skip
            print("  dojo's passes per candidate kind:", dict(passed))
            print("\n".join(disagreements[:20]))


if __name__ == "__main__":
    asyncio.run(main())
