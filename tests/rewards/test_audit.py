from __future__ import annotations

import pytest

from dojo.errors import InputError
from dojo.rewards import Grader
from dojo.rewards.audit import audit_tasks
from dojo.sandbox import AsyncSandbox
from dojo.tasks import Task, TestCase, load_humaneval


def fn_task(id: str, reference: str | None, tests: list[TestCase], prompt: str = "Write f(x).") -> Task:
    return Task(id=id, form="function", prompt=prompt, entry_point="f", tests=tests, reference=reference)


async def test_audit_finds_each_kind_of_unverifiable_task(fast_sandbox: AsyncSandbox) -> None:
    good = fn_task(
        "good", "def f(x):\n    return x * 2", [TestCase(args=[2], expected=4), TestCase(args=[5], expected=10)]
    )
    wrong_ref = fn_task("wrong_ref", "def f(x):\n    return x", [TestCase(args=[2], expected=4)])
    weak = fn_task("weak", "def f(x):\n    return None", [TestCase(args=[2], expected=None)])
    flaky = fn_task(
        "flaky",
        "import random\ndef f(x):\n    return random.random() < 0.5",
        [TestCase(args=[i], expected=True) for i in range(8)],
        prompt="Coin flips.",
    )
    no_ref = fn_task("no_ref", None, [TestCase(args=[1], expected=2)], prompt="Something else entirely.")
    twin = fn_task("twin", "def f(x):\n    return x * 2", good.tests, prompt="Write f(x). ")
    report = await audit_tasks([good, wrong_ref, weak, flaky, no_ref, twin], fast_sandbox, repeats=4)
    by_id = {t.id: t for t in report.tasks}
    assert by_id["good"].status == "ok" and by_id["good"].reference_rewards == [1.0] * 4
    assert by_id["wrong_ref"].problems[0].startswith("reference_fails")
    assert "return None" in by_id["weak"].trivial_passed and by_id["weak"].status == "unverifiable"
    assert any(p.startswith(("flaky", "reference_fails")) for p in by_id["flaky"].problems)
    assert by_id["no_ref"].problems[0].startswith("no_reference")
    assert "twin" in by_id["good"].duplicates
    summary = report.summary()
    assert summary["tasks"] == 6 and summary["unverifiable"] == 4


async def test_doing_nothing_may_earn_nothing(fast_sandbox: AsyncSandbox) -> None:
    """A task where a function that does nothing passes one check of several: the audit reports
    the partial credit it earns, unless the task pays all or nothing (HumanEval's tasks with a check
    that None passes do); an empty completion is no answer, not the prompt's stub."""
    tests = [TestCase(args=[[]], expected=None), TestCase(args=[[1, 2]], expected=2)]
    leaky = fn_task("leaky", "def f(x):\n    return max(x) if x else None", tests)
    whole = leaky.model_copy(update={"id": "whole", "partial_credit": False, "prompt": "Write f(x), all or nothing."})
    report = await audit_tasks([leaky, whole], fast_sandbox, repeats=1)
    by_id = {t.id: t for t in report.tasks}
    assert by_id["leaky"].status == "unverifiable", by_id["leaky"]
    assert any(p.startswith("do_nothing_earns: return None earns 0.5") for p in by_id["leaky"].problems)
    assert by_id["whole"].status == "ok", by_id["whole"].problems
    humaneval = {t.id: t for t in load_humaneval()}
    grader = Grader(fast_sandbox)
    longest = humaneval["HumanEval/12"]  # longest([]) == None
    assert not longest.partial_credit and humaneval["HumanEval/13"].partial_credit
    nothing = await grader.grade(longest, "    return None\n")
    assert (nothing.verdict, nothing.value) == ("partial", 0.0)
    empty = await grader.grade(longest, "")
    assert (empty.verdict, empty.value) == ("no_answer", 0.0)


async def test_humaneval_sample_is_verifiable_with_difficulty_estimates(fast_sandbox: AsyncSandbox) -> None:
    tasks = load_humaneval()[:20]
    report = await audit_tasks(tasks, fast_sandbox)
    assert report.unverifiable == []
    difficulties = [t.difficulty for t in report.tasks]
    assert all(d is not None and 0 <= d <= 1 for d in difficulties)
    assert len(set(difficulties)) > 5  # estimates differ between tasks
    assert report.to_json()["summary"]["verifiable"] == 20


async def test_a_multi_turn_api_tasks_gold_is_checked(fast_sandbox: AsyncSandbox) -> None:
    """BFCL multi-turn: the gold passes every time, and no call, the first turn's calls only, or
    all calls at once fail; a gold that calls a tool not offered at its turn is found."""
    from dojo.tasks import load_source
    from dojo.tasks.gold_calls import api_reference

    tasks = load_source("bfcl:multi_turn_base?n=4&seed=0")
    first = tasks[0]
    assert first.api is not None
    gold = [list(turn) for turn in first.tests[0].expected["turns"]]
    gold[0].append("no_such_tool()")
    broken = first.model_copy(update={"id": "broken", "tests": [TestCase(expected={"turns": gold})]})
    broken = broken.model_copy(update={"reference": api_reference(broken)})
    report = await audit_tasks([*tasks, broken], fast_sandbox, repeats=2)
    assert [t.status for t in report.tasks[:4]] == ["ok"] * 4
    assert all(t.reference_rewards == [1.0, 1.0] and not t.trivial_passed for t in report.tasks[:4])
    assert report.tasks[4].status == "unverifiable"
    assert report.tasks[4].problems == ["gold_call_fails: turn 0: no_such_tool: Error during execution: there is no "
                                        "function 'no_such_tool' to call"]  # fmt: skip
    with pytest.raises(InputError, match="unique"):
        await audit_tasks([first, first], fast_sandbox)


async def test_a_prompt_shared_by_many_tasks_is_reported_briefly(fast_sandbox: AsyncSandbox) -> None:
    """tau2's telecom tasks share 5 prompts among 2,285: each task names a few of its near-duplicates
    and counts them all (a full list is millions of ids in the report)."""
    from dojo.rewards.audit import DUPLICATES_LISTED, near_duplicates

    same = [Task(id=f"t{i:02d}", form="answer", prompt="What is six times seven?", reference="42") for i in range(30)]
    alone = Task(id="alone", form="answer", prompt="Name the capital city of France.", reference="Paris")
    found = near_duplicates([*same, alone])
    assert "alone" not in found and found["t00"] == [t.id for t in same[1:]]
    report = await audit_tasks([*same, alone], fast_sandbox, repeats=1)
    first = report.tasks[0]
    assert first.duplicate_count == 29 and first.duplicates == [t.id for t in same[1 : 1 + DUPLICATES_LISTED]]
    assert "near_duplicate: t01, t02, t03 and 26 more" in first.warnings
    assert report.summary()["near_duplicates"] == 30 and repr(report).startswith("AuditReport(31 tasks")
