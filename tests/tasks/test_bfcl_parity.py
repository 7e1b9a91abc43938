"""dojo's verdicts on BFCL's single-turn tasks against BFCL's own ``ast_checker`` (from the
``bfcl-eval`` wheel's files, ``tests/tasks/bfcl_parity.py``), on candidates made from the possible
answers of every AST-checked category: the ``bfcl`` rules agree on every one; the ``strict`` rules
differ only where BFCL passes a candidate, each time by a named rule. ``bench/bfcl_single_turn.py``
runs every task; here 40 of each category, drawn once (7,865 candidates in 2-3 s)."""

from __future__ import annotations

import collections

import pytest

from dojo.rewards.calls import STRICT_RULES
from dojo.tasks.bfcl import load_bfcl
from tests.tasks.bfcl_parity import AST_CATEGORIES, bfcl_verdict, candidates, dojo_verdict, strict_rule

TASKS_PER_CATEGORY = 40


@pytest.mark.parametrize("category", AST_CATEGORIES)
def test_bfcl_rules_give_bfcls_verdicts_and_strict_only_refuses_by_its_rules(category: str) -> None:
    kinds: collections.Counter[str] = collections.Counter()
    passed: collections.Counter[str] = collections.Counter()
    disagreements, unexplained, strict_rules = [], [], collections.Counter[str]()
    tasks = load_bfcl(category, n=TASKS_PER_CATEGORY, seed=3)
    for task in tasks:
        for kind, calls, model in candidates(task):
            theirs = bfcl_verdict(task, calls, model)
            assert not isinstance(theirs, str), f"BFCL's checker raised {theirs} on {task.id} {kind}: {calls}"
            ours, why = dojo_verdict(task, calls, "bfcl")
            strict, strict_why = dojo_verdict(task, calls, "strict")
            kinds[kind] += 1
            passed[kind] += ours
            if ours != theirs:
                disagreements.append((task.id, kind, why, calls))
            if strict != theirs:
                strict_rules[strict_rule(strict_why)] += 1
                if strict or strict_rule(strict_why) not in STRICT_RULES:
                    unexplained.append((task.id, kind, strict_why, calls))
    assert not disagreements, disagreements[:5]
    assert not unexplained, unexplained[:5]
    assert sum(kinds.values()) >= 250, kinds
    # the candidates discriminate: the gold passes, a wrong value, a wrong name, a call too many never do
    assert passed["gold"] >= kinds["gold"] - 1 and kinds["gold"] >= len(tasks) >= min(TASKS_PER_CATEGORY, 16)
    assert passed["wrong_name"] == passed["call_twice"] == 0 and kinds["wrong_name"] == len(tasks)
    assert passed["wrong_value"] < kinds["wrong_value"] // 20 + 1
    if category in ("simple_python", "live_multiple"):  # BFCL takes "" for an optional argument; strict does not
        assert passed["empty_string_for_optional"] > 0 and strict_rules["empty_string"] > 0
