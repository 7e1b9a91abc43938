"""The audit's own constant candidates (an answer of zeros, the question printed, the headings only)
are judged on the file their program writes without a run of each (issue #36: half of an analysis
family's audit runs): every task's tests still judge them, and a task they pass is still reported."""

from __future__ import annotations

import ast
import json

from dojo.rewards.analysis import constant_answers, guessed_answer, trivial_analysis_candidates
from dojo.rewards.audit import audit_tasks
from dojo.rewards.documents import FILLER, hollow_document
from dojo.rewards.extract import extract_code
from dojo.rewards.graders import Grader
from dojo.sandbox import AsyncSandbox
from dojo.tasks import load_source
from tests.sandbox.conftest import requires_isolation
from tests.tasks.recording import Recording


def test_the_question_candidate_prints_the_question_and_writes_an_empty_answer() -> None:
    """The prompt's own "```python block" no longer cuts the candidate's program short."""
    task = load_source("family:data_analysis?n=1&seed=2")[0]
    assert "```" in task.prompt_text()
    code = extract_code(dict(trivial_analysis_candidates(task))["print the question"], "python")
    call = ast.parse(code).body[0]
    assert isinstance(call, ast.Expr) and isinstance(call.value, ast.Call)
    assert ast.literal_eval(call.value.args[0]) == task.prompt_text()[:4000]
    known = constant_answers(task)
    assert known["print the question"] == b"{}"
    assert json.loads(known["answer of zeros"]) == guessed_answer(task)


@requires_isolation
async def test_constant_candidates_are_judged_as_a_run_would_judge_them(fast_sandbox: AsyncSandbox) -> None:
    grader = Grader(fast_sandbox)
    for task in load_source("family:data_analysis?n=3&seed=4") + load_source("family:scientific?n=3&seed=4"):
        known = constant_answers(task)
        assert set(known) == {"answer of zeros", "print the question"}
        for name, completion in trivial_analysis_candidates(task):
            if name in known:
                ran = await grader.grade(task, completion)
                assert await grader.grade_written(task, completion, known[name]) == ran, (task.id, name)
                assert ran.value == 0.0


@requires_isolation
async def test_the_audit_runs_only_references_and_each_distinct_headings_script_once(
    fast_sandbox: AsyncSandbox,
) -> None:
    analysis = load_source("family:data_analysis?n=4&seed=6") + load_source("family:scientific?n=4&seed=6")
    office = load_source("family:office?n=8&seed=6")
    recording = Recording(fast_sandbox)
    report = await audit_tasks([*analysis, *office], recording)  # type: ignore[arg-type]
    assert report.summary()["verifiable"] == len(analysis) + len(office), [t.problems for t in report.unverifiable]
    sources = [p.source for p in recording.programs]
    references = [extract_code(t.reference or "", "python") for t in [*analysis, *office]]
    hollow = {
        extract_code(h, "python") for t in office for f in ("", FILLER) if (h := hollow_document(t, f)) is not None
    }
    assert sorted(s for s in sources if s in references) == sorted(references * 2)  # each reference twice
    assert sorted(s for s in sources if s not in references) == sorted(
        hollow
    )  # each headings script (bare or filled) once


@requires_isolation
async def test_a_task_that_an_answer_of_zeros_passes_is_still_reported(fast_sandbox: AsyncSandbox) -> None:
    task = load_source("family:data_analysis?n=1&seed=8&difficulty=0")[0]
    test = task.tests[0]
    zeroed = task.model_copy(
        update={"tests": [test.model_copy(update={"expected": {**test.expected, "value": 0}}), *task.tests[1:]]}
    )
    recording = Recording(fast_sandbox)
    report = await audit_tasks([zeroed], recording)  # type: ignore[arg-type]
    problems = report.tasks[0].problems
    if len(task.tests) == 1:
        assert report.tasks[0].trivial_passed == ["answer of zeros"]
    else:
        assert any(p.startswith("do_nothing_earns: answer of zeros") for p in problems), problems
    assert all("answer.json', 'w')" not in p.source for p in recording.programs)  # judged without a run


async def test_the_same_file_graded_twice_gives_the_same_verdicts_and_unshared_documents() -> None:
    """A docx read twice (the audit's reference repeats) is parsed once; each reader gets its own copy."""
    import io

    import docx

    from dojo.rewards.documents import read_document

    task = next(t for t in load_source("family:office?n=6&seed=1") if t.document and t.document.format == "docx")
    made = docx.Document()
    made.add_heading("Summary", level=1)
    made.add_paragraph("Total: $10.00")
    buffer = io.BytesIO()
    made.save(buffer)
    script = "```python\nprint('writes the file')\n```"
    first, *_ = await read_document(task, script, None, written=buffer.getvalue())  # type: ignore[arg-type]
    again, *_ = await read_document(task, script, None, written=buffer.getvalue())  # type: ignore[arg-type]
    assert first is not None and first == again and first is not again
    assert [s.title for s in first.sections] == ["Summary"] and first.sections[0].fields == [("Total", "$10.00")]
    first.sections.clear()
    assert again.sections and (await read_document(task, script, None, written=buffer.getvalue()))[0] == again  # type: ignore[arg-type]
