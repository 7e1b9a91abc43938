"""family:doc_analysis: long seeded documents with planted discrepancies; a JSON report graded field
by field on the host (F1 for sets), trivial and stuffed reports earning nothing or little."""

from __future__ import annotations

import json

import pytest

from dojo.rewards import Grader
from dojo.rewards.audit import audit_tasks
from dojo.rewards.config import GradingConfig
from dojo.rewards.report import report_of, set_score
from dojo.sandbox import AsyncSandbox
from dojo.tasks import load_source
from dojo.tasks.doc_analysis import DISCREPANCIES
from dojo.tasks.model import Task, TestCase
from tests.tasks.recording import Recording


def report(task: Task) -> dict[str, object]:
    data, _ = report_of(task.reference or "")
    assert data is not None
    return data


def test_a_seed_reproduces_and_levels_grow_to_tens_of_thousands_of_tokens() -> None:
    first = load_source("family:doc_analysis?n=4&seed=2")
    assert [t.model_dump() for t in first] == [t.model_dump() for t in load_source("family:doc_analysis?n=4&seed=2")]
    easy, hard = (
        load_source("family:doc_analysis?n=4&difficulty=0"),
        load_source("family:doc_analysis?n=4&difficulty=1"),
    )
    assert all(1200 < len(t.prompt_text().split()) < 2500 and len(t.tests) == 4 for t in easy)
    assert all(len(t.prompt_text().split()) > 15000 and len(t.tests) >= 9 for t in hard)  # > 20,000 tokens
    for task in easy + hard:
        assert all(f'"{t.expected["field"]}"' in task.prompt_text() for t in task.tests)
        assert not task.visible_tests and report(task)["discrepancies"]  # the truth is never shown; never empty


async def test_audit_is_clean_and_nothing_runs_in_a_sandbox(fast_sandbox: AsyncSandbox) -> None:
    tasks = load_source("family:doc_analysis?n=16&seed=1")
    recording = Recording(fast_sandbox)
    report_ = await audit_tasks(tasks, recording)
    assert [t.id for t in report_.unverifiable] == [], [t.problems for t in report_.unverifiable]
    assert recording.programs == []  # graded on the host: the truth never enters a run


async def test_partial_credit_is_per_field_and_sets_score_by_f1(fast_sandbox: AsyncSandbox) -> None:
    task = load_source("family:doc_analysis?n=1&difficulty=1&seed=4")[0]
    mine = report(task)
    mine["parties" if "parties" in mine else "company"] = "Nobody Ltd" if "company" in mine else ["Nobody Ltd"]
    reward = await Grader(fast_sandbox, GradingConfig(mode="fraction")).grade(task, f"```json\n{json.dumps(mine)}\n```")
    assert reward.verdict == "partial" and 0.8 < (reward.value or 0) < 1
    assert sorted(k for k, v in reward.components.items() if k.startswith("field:") and v < 1) in (
        ["field:parties"], ["field:company"])  # fmt: skip
    assert set_score(["a", "B "], ["b", "c"]) == 0.5 and set_score("a", ["a"]) == 0.0


async def test_reward_hacks_earn_nothing_or_little(fast_sandbox: AsyncSandbox) -> None:
    task = load_source("family:doc_analysis?n=1&difficulty=0.9&seed=6")[0]
    grader = Grader(fast_sandbox)
    sections = range(1, 30)
    stuffed = {"discrepancies": [{"kind": k, "section": s} for k in DISCREPANCIES for s in sections]}
    for text in ("Every field extracted correctly.", json.dumps({"question": task.prompt_text()}),
                 json.dumps([t.expected["field"] for t in task.tests]), "```json\n{}\n```"):  # fmt: skip
        assert (await grader.grade(task, text)).value == 0.0
    reward = await grader.grade(task, f"```json\n{json.dumps(stuffed)}\n```")
    assert reward.components["field:discrepancies"] == 0.0 and reward.value == 0.0
    huge = {"discrepancies": [{"kind": "x", "section": i} for i in range(9000)]}
    assert (await grader.grade(task, f"```json\n{json.dumps(huge)}\n```")).verdict == "compile_error"


def test_a_fields_task_needs_named_fields() -> None:
    with pytest.raises(ValueError, match="answer_match 'fields'"):
        Task(id="x", form="answer", prompt="p", answer_match="fields", tests=[TestCase(expected="42")])


async def test_a_reply_that_reads_nothing_earns_nothing(fast_sandbox: AsyncSandbox) -> None:
    """A constant report of likely values (an auditor, a governing law, a term, a total that does not
    add up in the sections where the fees or the balance sheet always were) had earned 0.5 on 168 of
    200 hard tasks (adversary, 2026-12-07): those sections are now drawn, and fields a reply can guess
    earn only beside one it must read."""
    constant = {"auditor": "Hale & Pryor LLP", "governing_law": "Delaware", "term_months": 24, "year_end": "2024-12-28",
                "discrepancies": [{"kind": "total_mismatch", "section": s} for s in (2, 3, 4)]}  # fmt: skip
    grader = Grader(fast_sandbox)
    tasks = load_source("family:doc_analysis?n=120&seed=7")
    rewards = [await grader.grade(t, f"```json\n{json.dumps(constant)}\n```") for t in tasks]
    assert all(r.value == 0.0 for r in rewards), [r.components for r in rewards if r.value][:2]
    where = {d["section"] for t in tasks for d in report(t)["discrepancies"] if d["kind"] == "total_mismatch"}
    assert len(where) > 5, where  # (the fees, or the balance sheet, are anywhere past the first section)
    task = next(t for t in tasks if "company" in report(t))  # a right company beside the guesses: partial
    mine = {**constant, "company": report(task)["company"]}
    assert (await grader.grade(task, f"```json\n{json.dumps(mine)}\n```")).value == 0.5
