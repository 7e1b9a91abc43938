"""Where a task and a completion become a reward.

``Grader.grade(task, completion)`` extracts the code or the answer, scans code for reward hacks,
runs it in the sandbox by the task's form, compares outside the sandbox, and maps the test results
to a ``Reward``. One function per form does the running and comparing:

- ``grade_function_task``: all calls in one run, in a random order; return values compared here;
- ``grade_assert_task``: HumanEval ``check(candidate)`` with every assert tallied (see harness);
- ``grade_stdio_task``: one run per test (with the workspace's files, e.g. a database); tokens
  compared with float tolerance, or a checker;
- ``grade_answer_task``: one extracted answer, exact, numeric, or the source's own scorer;
- ``grade_report`` (``dojo.rewards.report``): an answer that is a JSON report, field by field;
- ``grade_repo_task``: the candidate's edits applied to the task's tree, its hidden tests run there
  (``dojo.rewards.repo``);
- ``grade_shell_task``: the candidate's bash script run on the task's tree, the final state read by
  a trusted process and checked here (``dojo.rewards.shell``);
- ``grade_analysis`` (``dojo.rewards.analysis``): the candidate's program writes an answer file in
  the sandbox; its fields are compared here with the task's values and tolerances;
- ``grade_tools_task``: the candidate's calls read from its text and checked here against the
  allowed values (``dojo.rewards.calls``); nothing runs;
- ``grade_api_task``: a tools task with a simulated API (``Task.api``): the candidate's calls of
  each turn run on the API in the sandbox, and the API's state after each turn is compared here
  with the gold calls' (``dojo.rewards.simulated_api``);
- ``grade_scene`` (``dojo.rewards.scene``): a tools task whose API is the 3D scene graph; the calls
  run in the sandbox, the final scene comes back as data and is measured here, check by check;
- ``grade_document``: the document in the reply (or the file its script writes in the sandbox),
  parsed here and checked rule by rule (``dojo.rewards.documents``, ``dojo.rewards.rules``).

A sandbox failure never becomes a 0: the reward's value is None (retry or drop the sample).
"""

from __future__ import annotations

import asyncio
import functools
import json
import math
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from dojo.errors import InputError
from dojo.rewards.analysis import grade_analysis
from dojo.rewards.calls import api_answer, check_calls, parse_calls
from dojo.rewards.config import DEFAULT_GRADING, GradingConfig
from dojo.rewards.documents import grade_document
from dojo.rewards.edit_scan import scan_repo_edits
from dojo.rewards.extract import extract_answer, extract_code, normalise_answer, parse_number, utf8_text
from dojo.rewards.hacks import Finding, scan_python, shown_examples
from dojo.rewards.harness import (
    HarnessRun,
    InvalidTask,
    assert_job,
    check_context,
    function_job,
    rewrite_asserts,
    run_harness,
)
from dojo.rewards.mapping import NOTHING, SHOWN_ONLY, RewardFunction, RewardMode, correctness, shown_examples_only
from dojo.rewards.outcome import CaseOutcome, GradeVerdict, Reward, RewardStats
from dojo.rewards.repo import (
    PHRASES_UNREAD,
    allowed_edits,
    canary_verdict,
    case_outcomes,
    parse_edits,
    plan_canaries,
    run_repo_tests,
)
from dojo.rewards.report import grade_report
from dojo.rewards.scene import grade_scene
from dojo.rewards.shell import run_shell_script, shell_outcomes
from dojo.rewards.simulated_api import (
    assertion_outcomes,
    candidate_said,
    candidate_turns,
    conversation_steps,
    final_outcomes,
    gold_run,
    run_api_calls,
    said_outcomes,
    tau2_cut_short,
    turn_outcomes,
)
from dojo.sandbox import ExecutionResult, InputFile, Limits, Program, SandboxAPI, Verdict
from dojo.sandbox.compare import stdout_matches
from dojo.tasks.canary_shown import redact
from dojo.tasks.gold_calls import gold_calls
from dojo.tasks.model import Task
from dojo.tasks.values import decode_value, returned_equal

DEFAULT_GRADING_LIMITS = Limits(wall_time=10.0, cpu_time=6.0, memory=512 << 20)


@dataclass
class TestResults:
    """What running the tests found, before it becomes a number."""

    __test__ = False
    passed: int = 0
    total: int = 0
    cases: list[CaseOutcome] = field(default_factory=list)
    compile_error: str | None = None
    infrastructure_error: str | None = None
    no_answer: str | None = None
    hack: str | None = None  # a confirmed reward hack (what was found): scores 0
    flags: list[str] = field(default_factory=list)
    components: dict[str, float] = field(default_factory=dict)  # verdicts reported beside correctness (not summed)


def candidate_code(task: Task, completion: str) -> str:
    """The code to grade: the last code block (or the whole text); for function/assert tasks whose
    completion does not define the entry point, the prompt's signature is prepended (HumanEval's
    completion convention). An empty completion stays empty: the prompt's stub alone does nothing,
    and on HumanEval it passed a test of 5 tasks (12, 90, 128, 137, 162: ``None`` is an answer)."""
    code = extract_code(completion, task.language)
    if task.form in ("function", "assert") and task.entry_point and code.strip():
        # (``[ \t]*``, not ``\s*``: that spans newlines, and 16,000 blank lines took 6.9 s of the event loop)
        name = re.escape(task.entry_point)
        defines = re.search(rf"^[ \t]*(async[ \t]+)?def[ \t]+{name}[ \t]*\(", code, re.MULTILINE)
        if not defines and isinstance(task.prompt, str) and f"def {task.entry_point}" in task.prompt:
            code = task.prompt + code
    return code


def _sandbox_failed(result: ExecutionResult) -> str | None:
    if result.verdict is Verdict.SANDBOX_ERROR:
        return result.sandbox_error or "sandbox error"
    return None


def _loaded(run: HarnessRun, out: TestResults) -> bool:
    """Whether the candidate loaded; otherwise ``out`` says why not (infrastructure, syntax, ...)."""
    if (err := run.sandbox_error) is not None:
        out.infrastructure_error = err
        return False
    if run.malformed:
        out.flags.append("suspicious:malformed_reply")
    load = run.load
    if load is None:
        out.cases.append(CaseOutcome(index=-1, passed=False, detail=f"the solution did not load: {run.ended_how()}"))
        return False
    if load["load"] == "ok":
        return True
    if load["load"] == "syntax":
        out.compile_error = str(load.get("error", "syntax error"))
    else:
        out.cases.append(CaseOutcome(index=-1, passed=False, detail=str(load.get("traceback") or load.get("error"))))
    return False


def call_orders(answers: list[str], rng: random.Random) -> tuple[list[int], list[int]]:
    """Two shuffled orders of the cases, chosen so that a counter replaying the answers in their
    original order (call k answered with case k's answer, in each pass) gives some case two
    different answers, whenever the answers are not all equal: with few distinct answers (booleans)
    two random orders often line up so that every case meets the same answer twice."""
    n = len(answers)
    first, second = list(range(n)), list(range(n))
    rng.shuffle(first)
    rng.shuffle(second)
    if n > 1 and second == first:
        second.reverse()
    # the replay answers the case at position p with answers[p] in both passes
    if all(answers[p] == answers[q] for p, q in zip(_positions(first), _positions(second), strict=True)):
        distinct = next((b for b in range(1, n) if answers[b] != answers[0]), None)
        if distinct is not None:  # move two cases between positions whose answers differ
            second[0], second[distinct] = second[distinct], second[0]
    return first, second


def _positions(order: list[int]) -> list[int]:
    """Where each case stands in ``order``."""
    where = [0] * len(order)
    for p, case in enumerate(order):
        where[case] = p
    return where


async def grade_function_task(
    task: Task, code: str, sandbox: SandboxAPI, limits: Limits | None = None, seed: int | None = None
) -> TestResults:
    """Call ``task.entry_point`` on every test's arguments in one sandbox run, twice, in two
    different shuffled orders; compare the returned data here. Expected values never enter the
    sandbox. A case whose two answers differ means state carried between calls (a call counter
    replaying answers): a hack."""
    assert task.entry_point
    tests = task.tests
    first, second = call_orders([json.dumps(t.expected, sort_keys=True) for t in tests], random.Random(seed))
    calls = [(i, tests[i].args, tests[i].kwargs) for i in first + second]
    out = TestResults(total=len(tests))
    job = function_job(task.entry_point, calls, task.float_tolerance)
    run = await run_harness(
        sandbox, code, job, limits or task.limits or DEFAULT_GRADING_LIMITS, environment=task.environment
    )
    if not _loaded(run, out):
        return out
    by_case: dict[int, dict[str, Any]] = {}
    for report in run.cases:
        i = report["case"]
        if i in by_case and _answer_of(by_case[i]) != _answer_of(report):
            out.hack = f"test {i} gave two different answers to the same call: state carried between calls"
            out.flags.append("hack:state_between_calls")
            return out
        by_case.setdefault(i, report)
    for i, t in enumerate(tests):
        r = by_case.get(i)
        if r is None:
            out.cases.append(CaseOutcome(index=i, passed=False, detail=f"no result: {run.ended_how()}"))
            continue
        if "error" in r:
            out.cases.append(CaseOutcome(index=i, passed=False, detail=f"raised {r['error']}"))
            continue
        try:
            ok = returned_equal(r.get("value"), decode_value(t.expected), task.float_tolerance)
        except (ValueError, TypeError):  # (an expected value that is no wire value: no answer passes)
            ok = False
        detail = "" if ok else ("wrong return value" if not t.visible else f"returned {str(r.get('value'))[:200]}")
        out.cases.append(CaseOutcome(index=i, passed=ok, detail=detail))
        out.passed += ok
    return out


@functools.lru_cache(maxsize=4096)
def rewrite_asserts_cached(code: str) -> tuple[str, int]:
    return rewrite_asserts(code)


def check_program(task: Task) -> tuple[list[tuple[str, int]], str]:
    """An assert task's rewritten checks (with their assert counts) and the code they run with;
    ``InvalidTask`` naming the task when its check code or its helpers do not compile."""
    rewritten: list[tuple[str, int]] = []
    for i, t in enumerate(task.tests):
        try:
            rewritten.append(rewrite_asserts_cached(t.code or ""))
        except (SyntaxError, ValueError) as e:
            raise InvalidTask(f"task {task.id}: the check code of test {i} does not compile: {e}") from e
    return rewritten, check_context(task.prompt, task.entry_point)


def _answer_of(report: dict[str, Any]) -> str:
    return json.dumps(report.get("value"), sort_keys=True) if "error" not in report else "error"


async def grade_assert_task(task: Task, code: str, sandbox: SandboxAPI, limits: Limits | None = None) -> TestResults:
    """Run each test's ``check(candidate)`` with its asserts tallied, in the harness's trusted
    process; every assert is one test."""
    assert task.entry_point
    rewritten, context = check_program(task)
    job = assert_job(task.entry_point, [src for src, _ in rewritten], task.float_tolerance, context)
    out = TestResults(total=sum(max(1, n) for _, n in rewritten))  # until the reports say how many ran
    run = await run_harness(
        sandbox, code, job, limits or task.limits or DEFAULT_GRADING_LIMITS, environment=task.environment
    )
    if run.task_error is not None and run.sandbox_error is None:
        raise InvalidTask(f"task {task.id}: {run.task_error}")
    if not _loaded(run, out):
        return out
    out.total = 0
    for i, (_, n_asserts) in enumerate(rewritten):
        r = run.tests.get(i)
        if r is None:
            out.total += max(1, n_asserts)
            out.cases.append(CaseOutcome(index=i, passed=False, detail=f"check did not finish: {run.ended_how()}"))
            continue
        passed, failed = int(r.get("passed", 0)), int(r.get("failed", 0))
        if not r.get("completed"):
            failed += 1  # the check stopped early: it cannot count as passing
        # Asserts written but never reached (a loop over an empty answer) count as failed: an
        # honest answer runs every assert of its check at least once (all 164 HumanEval do).
        skipped = max(0, n_asserts - passed - failed)
        failed += skipped
        out.passed += passed
        out.total += passed + failed
        detail = "" if failed == 0 else f"{failed} assertion(s) failed" + (f"; {r['error']}" if r.get("error") else "")
        if skipped:
            detail += f" ({skipped} of them never ran)"
        out.cases.append(CaseOutcome(index=i, passed=failed == 0, detail=detail))
    return out


async def grade_stdio_task(task: Task, code: str, sandbox: SandboxAPI, limits: Limits | None = None) -> TestResults:
    """One run per test with its stdin; stdout compared here, or judged by the task's checker
    (a Python program run in its own sandbox run with input.txt, output.txt and expected.txt)."""
    lim = limits or task.limits or DEFAULT_GRADING_LIMITS
    files = [
        InputFile(path=p, content=text.encode()) for p, text in (task.workspace.files if task.workspace else {}).items()
    ]
    programs = [
        Program(language=task.language, source=code, stdin=t.stdin, environment=task.environment, files=files)
        for t in task.tests
    ]
    results = await sandbox.run_many(programs, lim)
    out = TestResults(total=len(task.tests))
    if any(_sandbox_failed(r) for r in results):
        out.infrastructure_error = next(e for r in results if (e := _sandbox_failed(r)))
        return out
    compile_failed = next((r for r in results if r.verdict is Verdict.COMPILE_ERROR), None)
    if compile_failed is not None:
        out.compile_error = (compile_failed.compile.stderr if compile_failed.compile else "") or "compile error"
        return out
    checks: list[bool | None] = []
    for t, r in zip(task.tests, results, strict=True):
        if r.verdict is not Verdict.ACCEPTED:
            checks.append(False)
        elif task.checker is None:
            checks.append(stdout_matches(r.stdout, str(t.expected), task.float_tolerance))
        else:
            checks.append(None)
    pending = [i for i, c in enumerate(checks) if c is None]
    if pending:
        judged = await sandbox.run_many(
            [_checker_program(task, task.tests[i].stdin, results[i].stdout, task.tests[i].expected) for i in pending],
            DEFAULT_GRADING_LIMITS,
        )
        if any(_sandbox_failed(j) for j in judged):
            out.infrastructure_error = "the checker's sandbox run failed"
            return out
        for i, j in zip(pending, judged, strict=True):
            checks[i] = j.verdict is Verdict.ACCEPTED
    for i, (t, r, ok) in enumerate(zip(task.tests, results, checks, strict=True)):
        if ok:
            out.passed += 1
            out.cases.append(CaseOutcome(index=i, passed=True))
            continue
        if r.verdict is not Verdict.ACCEPTED:
            detail = f"{r.verdict.value}: {r.stderr[-500:]}" if r.stderr else r.verdict.value
        else:
            detail = "wrong output" if not t.visible else f"wrong output: {r.stdout[:200]!r}"
        out.cases.append(CaseOutcome(index=i, passed=False, detail=detail))
    return out


def _checker_program(task: Task, stdin: str, stdout: str, expected: Any) -> Program:
    assert task.checker is not None
    files = [
        InputFile(path="input.txt", content=stdin.encode()),
        InputFile(path="output.txt", content=stdout.encode()),
        InputFile(path="expected.txt", content=("" if expected is None else str(expected)).encode()),
    ]
    return Program(language="python", source=task.checker, files=files)


async def grade_repo_task(
    task: Task, completion: str, sandbox: SandboxAPI, limits: Limits | None = None
) -> TestResults:
    """Apply the completion's edits to the task's tree and run its tests on it, in one run. Edits
    of paths the workspace protects (its tests, conftest.py, ...) are dropped and flagged. Tests
    with ``expected="guard"`` are not scored, but if one fails nothing counts as passed; they run
    after the scored tests, and not at all once every scored test has failed."""
    assert task.workspace is not None
    out = TestResults(total=sum(not t.guard for t in task.tests))
    edits = parse_edits(completion)
    if not edits:
        out.no_answer = "no_edits: give edits as <file path=...> blocks or SEARCH/REPLACE blocks"
        return out
    allowed, refused = allowed_edits(edits, task.workspace)
    if refused:
        out.flags.append("suspicious:edited_protected_path")
    out.cases += [CaseOutcome(index=-1, passed=False, detail=f"edit ignored: {why}") for why in refused]
    # drawn anew for each grading: nothing to learn (off the loop: a first draw reads the package's phrases)
    plan = await asyncio.to_thread(plan_canaries, task, random.SystemRandom())
    if plan.phrases_unread:
        out.flags.append(PHRASES_UNREAD)
    # the scored tests (each canaried one as its copies, the twin not told apart) run first: if all
    # fail, the guards need not run
    scored = [node for t in task.tests if not t.guard for node in plan.node_ids(t.code or "")]
    tests = [*scored, *(t.code or "" for t in task.tests if t.guard)]
    run = await run_repo_tests(plan.graded_task(task), allowed, tests, sandbox, limits, scored=scored)
    if run.infrastructure_error is not None:
        out.infrastructure_error = run.infrastructure_error
        return out
    if (found := canary_verdict(plan, run.outcomes)) is not None:
        out.hack, flag = found
        out.flags.append(flag)
        return out
    for node, group in plan.groups.items():  # the twin's outcome is the test's, its expected value unsaid
        passed, why = run.outcomes.pop(group.twin, (False, "not run: the report does not name it"))
        run.outcomes[node] = (passed, redact(why, group.values))
    out.cases += [CaseOutcome(index=-1, passed=False, detail=f"edit not applied: {p}") for p in run.problems]
    cases = case_outcomes(task, run)
    unrun: frozenset[int] = frozenset()
    if not any(c.passed for c, t in zip(cases, task.tests, strict=True) if not t.guard):
        # every scored test failed, so the run skipped the guards: the score is 0 whatever they do
        unrun = frozenset(i for i, t in enumerate(task.tests) if t.guard and (t.code or "") not in run.outcomes)
        for i in unrun:
            cases[i] = CaseOutcome(index=i, passed=False, detail="not run: no scored test passed")
    _score_guarded(out, task, cases, "test(s) that passed before fail now", unrun)
    return out


def _score_guarded(
    out: TestResults, task: Task, cases: list[CaseOutcome], broken_means: str, unrun: frozenset[int] = frozenset()
) -> None:
    """Count ``cases`` (one per test of ``task``) into ``out``: guards are not scored, and one that
    fails scores nothing (a fix that breaks what worked is no fix; doing nothing is not a job done).
    Guards in ``unrun`` (indexes) were not run and are not counted as broken."""
    out.cases += cases
    broken = sum(
        not c.passed for i, (c, t) in enumerate(zip(cases, task.tests, strict=True)) if t.guard and i not in unrun
    )
    out.passed = 0 if broken else sum(c.passed for c, t in zip(cases, task.tests, strict=True) if not t.guard)
    if broken:
        out.cases.append(CaseOutcome(index=-1, passed=False, detail=f"{broken} {broken_means}"))


async def grade_shell_task(
    task: Task, completion: str, sandbox: SandboxAPI, limits: Limits | None = None
) -> TestResults:
    """Run the completion's bash script on the task's tree; check the final state here. Checks with
    ``"guard": true`` (what must stay as it was) are not scored, but one failing scores 0."""
    out = TestResults(total=sum(not t.guard for t in task.tests))
    script = extract_code(completion, "bash")
    if not script.strip():
        out.no_answer = "no_script: give the commands as a ```bash block"
        return out
    reference = None
    if any(isinstance(t.expected, dict) and t.expected.get("reference_state") for t in task.tests):
        gold = extract_code(task.reference or "", "bash")
        (report, infra, why), (reference, gold_infra, gold_why) = await asyncio.gather(
            run_shell_script(task, script, sandbox, limits), run_shell_script(task, gold, sandbox, limits)
        )
        infra = infra or gold_infra
        if reference is None and gold_infra is None:
            raise InvalidTask(f"task {task.id}: its reference script left no state to compare with: {gold_why}")
    else:
        report, infra, why = await run_shell_script(task, script, sandbox, limits)
    if infra is not None:
        out.infrastructure_error = infra
        return out
    if report is None:
        out.cases.append(CaseOutcome(index=-1, passed=False, detail=why or "no state"))
        return out
    if report.get("ended") == "timeout":
        out.cases.append(
            CaseOutcome(index=-1, passed=False, detail="the script ran out of time (its state is checked)")
        )
    _score_guarded(out, task, shell_outcomes(task, report, reference), "file(s) that had to stay as they were changed")
    return out


def grade_tools_task(task: Task, completion: str, rules: str | None = None) -> TestResults:
    """Read the completion's calls and check them against each test (one per expected call set), by
    ``rules`` (``bfcl`` or ``strict``, ``dojo.rewards.calls``) when given, else by each test's own."""
    out = TestResults(total=len(task.tests))
    calls = parse_calls(completion)
    for i, test in enumerate(task.tests):
        ok, why = check_calls(calls, test.expected, rules)
        out.cases.append(CaseOutcome(index=i, passed=ok, detail=why))
        out.passed += ok
    return out


async def grade_api_task(task: Task, completion: str, sandbox: SandboxAPI, limits: Limits | None = None) -> TestResults:
    """Run the candidate's calls turn by turn on the task's simulated API, and the gold calls in
    their own run; compare each checked turn's state and results here (BFCL's multi-turn rule)."""
    gold = gold_calls(task)
    assert task.api is not None
    final = task.api.check == "final_state"
    expected = task.tests[0].expected
    say = [str(t) for t in expected.get("say", [])] if final else []
    asserts = expected.get("asserts") if final else None  # tau2 telecom: assertion values, not a gold state
    actions = list(expected.get("actions", [])) if asserts is not None else []
    if asserts is not None:
        out = TestResults(total=len(asserts) + len(actions) + len(say))
    else:
        out = TestResults(total=1 + len(say) if final else sum(1 for turn in gold if turn))
    answer = api_answer(completion)
    calls, problem = candidate_turns(answer, len(gold))
    if problem is not None:
        out.flags.append("suspicious:malformed_reply")
    if not any(calls) and not final:  # (tau2: making no call may be the right answer: a refusal)
        out.no_answer = "no_calls: no call could be read from the answer"
        return out
    try:
        if asserts is not None:  # checked against the task's values: no gold run
            mine = theirs = await run_api_calls(task, calls, sandbox, limits)
        else:
            mine, theirs = await asyncio.gather(
                run_api_calls(task, calls, sandbox, limits), gold_run(task, sandbox, limits)
            )
    except ValueError as e:
        raise InvalidTask(str(e)) from None
    if (err := mine.infrastructure_error or theirs.infrastructure_error) is not None:
        out.infrastructure_error = err
        return out
    if theirs.problem is not None:
        raise InvalidTask(f"task {task.id}: its gold calls do not run: {theirs.problem}")
    if mine.problem is not None:
        out.cases.append(CaseOutcome(index=-1, passed=False, detail=mine.problem))
        return out
    if final:  # tau2: 0 for a conversation it cuts short (its parts multiply: ``Task.partial_credit``)
        steps = conversation_steps(answer, len(task.api.turns), solo=asserts is not None)
        if (cut := tau2_cut_short(mine.errors(), steps)) is not None:
            out.cases = [CaseOutcome(index=-1, passed=False, detail=cut)]
            return out
        said = candidate_said(answer)  # (an answer that says nothing told the user nothing)
        if asserts is not None:
            out.cases = assertion_outcomes(list(asserts), actions, calls, mine)
            out.cases += said_outcomes(say, said, len(out.cases))
        else:
            out.cases = final_outcomes(say, said, mine, theirs)
    else:
        out.cases = turn_outcomes(gold, calls, mine, theirs)
    out.passed = sum(c.passed for c in out.cases)
    return out


@functools.lru_cache(maxsize=64)
def _reasoning_gym_dataset(name: str) -> Any:
    import reasoning_gym

    return reasoning_gym.create_dataset(name, size=1, seed=0)


def grade_answer_task(task: Task, completion: str) -> TestResults:
    """Extract one final answer (capped in length) and compare it with the expected one."""
    expected = task.tests[0].expected if task.tests else task.reference
    expected_text = "" if expected is None else str(expected)
    out = TestResults(total=1)
    found = extract_answer(completion, max_chars=max(256, 4 * len(expected_text)))
    if found.answer is None:
        out.no_answer = found.problem
        if found.problem in ("multiple_answers", "answer_too_long"):
            out.flags.append(f"suspicious:{found.problem}")
        return out
    answer = found.answer
    if task.answer_match == "reasoning_gym":
        entry = task.metadata.model_extra.get("rg_entry") if task.metadata.model_extra else None
        name = task.metadata.model_extra.get("rg_dataset") if task.metadata.model_extra else None
        if not (entry and name):
            raise InvalidTask(f"task {task.id}: answer_match 'reasoning_gym' needs metadata rg_dataset and rg_entry")
        try:
            score = float(_reasoning_gym_dataset(name).score_answer(answer, entry) or 0.0)
        except Exception:  # the generator's scorer choking on a malformed answer: a wrong answer
            score = 0.0
        ok = score >= 1.0 - 1e-9
    elif task.answer_match == "numeric":
        a, e = parse_number(answer), parse_number(expected_text)
        ok = (
            a is not None
            and e is not None
            and math.isclose(a, e, rel_tol=task.float_tolerance, abs_tol=task.float_tolerance)
        )
    else:
        ok = normalise_answer(answer) == normalise_answer(expected_text)
    out.passed = int(ok)
    out.cases.append(CaseOutcome(index=0, passed=ok, detail="" if ok else "wrong answer"))
    return out


def _scanned(findings: list[Finding]) -> tuple[list[str], str | None]:
    """A scan's flags, and what its hack findings say (None when it has none)."""
    hacks = [f for f in findings if f.severity == "hack"]
    detail = "; ".join(f"line {f.line}: {f.detail}" for f in hacks[:5]) if hacks else None
    return sorted({f.flag() for f in findings}), detail


class Grader:
    """Grades completions of tasks into rewards, through one sandbox, as ``config`` says
    (``GradingConfig``: reward mode, limits, static scan, shaping)."""

    def __init__(
        self, sandbox: SandboxAPI, config: GradingConfig = DEFAULT_GRADING, *, stats: RewardStats | None = None
    ) -> None:
        if not isinstance(config, GradingConfig):
            raise TypeError(f"config must be a GradingConfig, not {type(config).__name__}")
        self.sandbox = sandbox
        self.config = config
        self.stats = stats or RewardStats()

    @property
    def limits(self) -> Limits | None:
        return self.config.limits

    async def grade(self, task: Task, completion: str, *, seed: int | None = None) -> Reward:
        reward = await self._grade(task, utf8_text(completion), seed)
        self.stats.add(reward)
        return reward

    async def grade_written(self, task: Task, completion: str, written: bytes) -> Reward:
        """Grade ``completion`` of an analysis task or of a document written to a file from
        ``written``, the file its program is known to write, judged as if a run had written it,
        without one: for the audit's own constant candidates (an answer of zeros, the headings
        only). Never for a model's: what its program writes is only known by running it."""
        if task.form == "analysis":
            analysed = await grade_analysis(task, completion, self.sandbox, self.limits, written=written)
            results = TestResults(**vars(analysed))
        elif task.form == "document" and task.document is not None and task.document.path is not None:
            results = TestResults(
                **vars(await grade_document(task, completion, self.sandbox, self.limits, written=written))
            )
        else:
            raise InputError(f"a written file is graded for analysis tasks and file documents, not {task.form!r} ones")
        reward = self._reward(task, completion, results)
        self.stats.add(reward)
        return reward

    async def grade_many(self, items: Sequence[tuple[Task, str]]) -> list[Reward]:
        return list(await asyncio.gather(*(self.grade(t, c) for t, c in items)))

    async def _grade(self, task: Task, completion: str, seed: int | None) -> Reward:
        if task.form == "answer" and task.answer_match == "fields":
            return self._reward(task, completion, TestResults(**vars(grade_report(task, completion))))
        if task.form == "answer":
            return self._reward(task, completion, grade_answer_task(task, completion))
        if task.form == "tools" and task.api is not None and task.api.check == "geometry":
            scene = await grade_scene(task, api_answer(completion), self.sandbox, self.limits)
            return self._reward(task, completion, TestResults(**vars(scene)))
        if task.form == "tools" and task.api is not None:
            return self._reward(task, completion, await grade_api_task(task, completion, self.sandbox, self.limits))
        if task.form == "tools":
            rules = None if self.config.call_rules == "task" else self.config.call_rules
            return self._reward(task, completion, grade_tools_task(task, completion, rules))
        if task.form == "repo":
            return await self._grade_repo(task, completion)
        if task.form == "shell":
            return self._reward(task, completion, await grade_shell_task(task, completion, self.sandbox, self.limits))
        if task.form == "analysis":
            analysed = await grade_analysis(task, completion, self.sandbox, self.limits)
            return self._reward(task, completion, TestResults(**vars(analysed)))
        if task.form == "document":
            graded = await grade_document(task, completion, self.sandbox, self.limits)
            return self._reward(task, completion, TestResults(**vars(graded)))
        code = candidate_code(task, completion)
        if not code.strip():
            return self._reward(task, completion, TestResults(total=max(1, len(task.tests)), no_answer="no_code"))
        flags: list[str] = []
        if self.config.scan and task.language == "python":
            flags, hack = _scanned(scan_python(code, task.form, shown_examples(task)))
            if hack is not None:
                return self._reward(task, completion, TestResults(total=len(task.tests), hack=hack, flags=flags))
        if task.form == "function":
            results = await grade_function_task(task, code, self.sandbox, self.limits, seed)
        elif task.form == "assert":
            results = await grade_assert_task(task, code, self.sandbox, self.limits)
        else:
            results = await grade_stdio_task(task, code, self.sandbox, self.limits)
        results.flags = sorted({*results.flags, *flags})
        return self._reward(task, completion, results)

    async def _grade_repo(self, task: Task, completion: str) -> Reward:
        """A repo task: the diff check of the edits first (when the scan is on), then the run."""
        flags: list[str] = []
        if self.config.scan and task.workspace is not None:
            edits, _ = allowed_edits(parse_edits(completion), task.workspace)
            flags, hack = _scanned(scan_repo_edits(task, edits))
            if hack is not None:
                total = sum(not t.guard for t in task.tests)
                return self._reward(task, completion, TestResults(total=total, hack=hack, flags=flags))
        results = await grade_repo_task(task, completion, self.sandbox, self.limits)
        results.flags = sorted({*results.flags, *flags})
        return self._reward(task, completion, results)

    def _reward(self, task: Task, completion: str, r: TestResults) -> Reward:
        if r.infrastructure_error is not None:
            return Reward(
                value=None, verdict="infrastructure_error", total=r.total, flags=r.flags, error=r.infrastructure_error
            )
        if r.hack is not None:
            return Reward(value=0.0, verdict="hack", total=r.total, components={"correctness": 0.0}, flags=r.flags,
                          error=f"reward hacking: {r.hack}")  # fmt: skip
        verdict: GradeVerdict
        if r.compile_error is not None:
            verdict, error = "compile_error", r.compile_error
        elif r.no_answer is not None:
            verdict, error = "no_answer", r.no_answer
        else:
            verdict = "pass" if r.total and r.passed == r.total else ("partial" if r.passed else "fail")
            error = None
        counted, flags, cases = r.passed, r.flags, r.cases
        if verdict == "partial" and shown_examples_only(task, r.cases):
            counted, verdict, flags = 0, "fail", sorted({*flags, SHOWN_ONLY})
            cases = [*cases, CaseOutcome(index=-1, passed=False, detail="only the examples the prompt shows pass: 0")]
        mode: RewardMode | RewardFunction = self.config.mode
        if not task.partial_credit and mode == "default":  # (the source's own reward: all or nothing)
            mode = "binary"
        score = correctness(counted, r.total, mode) if verdict in ("pass", "partial", "fail") else 0.0
        components = {"correctness": score}
        for hook in self.config.shaping:  # (no answer: shaping may cost, never pay; a format bonus paid ```\n```)
            components[hook.name] = min(float(hook(completion, score)), 0.0 if verdict in NOTHING else float("inf"))
        value = sum(components.values())  # correctness and shaping; the verdicts below are reported, not summed
        components.update(r.components)
        return Reward(
            value=value,
            verdict=verdict,
            passed=r.passed,
            total=r.total,
            components=components,
            flags=flags,
            cases=cases,
            error=error,
        )
