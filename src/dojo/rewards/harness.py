"""The one harness that calls a candidate's function in the sandbox: every path that grades a
function or a HumanEval ``check(candidate)`` (``Grader``, the TRL and verl bridges, ``dojo tasks
audit``, the HTTP API's function-call cases) runs this program.

Two processes inside one sandbox run, and only data crosses between them:

- the **trusted process** (the run's main process) holds the job (the calls, or the task's check
  code and its helpers), the per-run nonce, the tally and the report channel (fd 1, read by the
  grader). The zygote starts it non-dumpable (``AsyncSandbox.run(harness=True)``; the harness
  checks, and re-applies it after an execve), so a process of the same uid can neither read nor
  write its memory (``/proc/<pid>/mem``, ``ptrace``, ``process_vm_readv``) nor open its fds, and
  with every signal blocked that can be (what is left, SIGKILL and SIGSTOP, ends or stalls it:
  cases it did not report fail);
- the **candidate's process** is forked from it *before* it reads its job (by the slot's forker,
  in C, before either process runs any Python: forker.c's ``split_harness``; or, without one, by
  the trusted process first thing): the job reaches the run on a private stdin that never
  entered the zygote's memory (``AsyncSandbox.run(..., harness=True)``), so the candidate's
  address space holds neither the job, nor the nonce, nor an earlier run's data. It keeps only
  fd 0 (``/dev/null``), fds 1 and 2 (the run's stderr: its prints never reach the report channel)
  and its two pipe ends; then it loads ``/box/solution.py`` and answers calls.

Where the slot has its forker, the trusted process is the slot's **judge**
(``dojo.sandbox.guest.judge``): one process per slot, forked before the slot held any job, of a uid
of its own (rootless: a user namespace of its own), non-dumpable and with every blockable signal
blocked, given each run's job, channel, report pipe and stderr by the zygote; each run then makes
only the candidate's process (forker.c's ``become_candidate``). A grade costs one process, not two.

The program is ``dojo.rewards.programs.harness``. The channel: JSON messages, each a frame of the
one framing (``dojo.sandbox.guest.wire``). Trusted -> candidate: ``{"entry_point": name}``, then
``{"args": ..., "kwargs": ...}`` per call. Candidate -> trusted: ``{"load": "ok"|"syntax"|"error"|
"missing", ...}``, then ``{"value": ...}`` or ``{"error": "Type: message"}`` per call. Values are
encoded with exact builtin types (``dojo.tasks.values``); the trusted side decodes every message
strictly and treats anything malformed as a failed case (reported as ``malformed``). Nothing of
the candidate's process is ever called by the trusted one: its values arrive as plain data. The
modules the trusted side uses are in its memory before the fork (the shared ones travel with the
program's text: ``dojo.sandbox.bundle``), and a later import there (base64, for the first bytes
value) never looks where the candidate can write (/box, the working directory: ``guest.trusted``).

Function form: return values are re-encoded and reported; the grader compares them with the
expected values, which never enter the sandbox. Assert form: the check code runs in the trusted
process, in a namespace built from the task's own text (the prompt's helpers, such as HumanEval's
``poly`` or ``encode_cyclic``: never the candidate's), with ``candidate`` a proxy that calls into
the candidate's process; each ``assert`` is tallied (``rewrite_asserts``).

The candidate's process loads ``/box/solution.py`` as soon as it starts, while the trusted process
reads its job; the task's code and checks arrive compiled by the host (``compiled_checks``) where
the sandbox's interpreter is of the host's version. When the job is done the trusted process kills
the candidate's and exits without waiting for it: the zygote reaps it and counts its CPU time in
the run's.

A candidate that exits, crashes, hangs, floods its output, forks, or kills the trusted process
fails every case it did not answer. The program's top level only defines; each slot runs it once
(see ``dojo.rewards.programs.harness`` for who forks the candidate's process).
"""

from __future__ import annotations

import ast
import base64
import functools
import json
import marshal
import secrets
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from dojo.errors import InputError
from dojo.rewards.programs import program_source
from dojo.rewards.programs.harness import ended_by
from dojo.sandbox import ExecutionResult, InputFile, LimitKind, Limits, Program, SandboxAPI, Verdict
from dojo.sandbox.guest import ending, trusted, wire
from dojo.tasks import values

SOLUTION_FILE = "solution.py"


def harness_source() -> str:
    """The harness program, with the modules it shares with the host (the value encoding, the
    framing of its channel) and with the zygote's runs (how a program's process ends). Its top level
    only defines (``main()`` runs it), so the zygote can run it once per slot and hand every run the
    defined functions (``AsyncSandbox.run(harness=True)``)."""
    return program_source("harness", (values, wire, ending, trusted))


class InvalidTask(InputError):
    """A task whose own code (check code, or the prompt's helpers) cannot be compiled: an error in
    the task set, never a reward."""


def new_nonce() -> str:
    return secrets.token_hex(16)


class _AssertRewriter(ast.NodeTransformer):
    """``assert T`` -> tally whether T is True (a bool: ``assert candidate(x)`` wants ``True``,
    not a truthy object); ``assert not T`` -> whether T is False; ``a == b`` -> compare as data."""

    def __init__(self) -> None:
        self.count = 0

    def visit_Assert(self, node: ast.Assert) -> ast.AST:
        if isinstance(node.test, ast.Constant):  # HumanEval's `assert True, "..."`: checks nothing
            return ast.copy_location(ast.Pass(), node)
        self.count += 1
        test = node.test
        judge = "_dojo_truth"
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            test, judge = test.operand, "_dojo_falsity"
        test = _CompareRewriter().visit(test)
        tally_ok = ast.Expr(
            ast.Call(
                ast.Name("_dojo_tally", ast.Load()),
                [ast.Call(ast.Name(judge, ast.Load()), [test], [])],
                [],
            )
        )
        tally_fail = ast.Expr(ast.Call(ast.Name("_dojo_tally", ast.Load()), [ast.Constant(False)], []))
        handler = ast.ExceptHandler(ast.Name("BaseException", ast.Load()), None, [tally_fail])
        return ast.copy_location(ast.Try([tally_ok], [handler], [], []), node)


class _CompareRewriter(ast.NodeTransformer):
    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        self.generic_visit(node)
        if len(node.ops) != 1 or not isinstance(node.ops[0], (ast.Eq, ast.NotEq)):
            return node
        call = ast.Call(ast.Name("_dojo_eq", ast.Load()), [node.left, node.comparators[0]], [])
        if isinstance(node.ops[0], ast.NotEq):
            return ast.copy_location(ast.UnaryOp(ast.Not(), call), node)
        return ast.copy_location(call, node)


def rewrite_asserts(test_code: str) -> tuple[str, int]:
    """The check code with every assert tallied (see module doc); also how many asserts it has.
    SyntaxError when the check code does not parse."""
    tree = ast.parse(test_code)
    rewriter = _AssertRewriter()
    tree = rewriter.visit(tree)
    ast.fix_missing_locations(tree)
    return ast.unparse(tree), rewriter.count


def check_context(prompt: object, entry_point: str | None = None) -> str:
    """The task's own code that its check runs with: the prompt, when the prompt is Python (a
    HumanEval prompt defines the helpers its check uses, e.g. ``poly``); else nothing. Docstrings
    and the entry point's stub are left out (the check's ``candidate`` stands for it): less to
    compile in every grading run."""
    if not isinstance(prompt, str) or not prompt.strip():
        return ""
    return _python_context(prompt, entry_point)


@functools.lru_cache(maxsize=4096)
def _python_context(prompt: str, entry_point: str | None) -> str:
    try:
        tree = ast.parse(prompt)
    except (SyntaxError, ValueError):
        return ""
    tree.body = [n for n in tree.body if not (isinstance(n, ast.FunctionDef) and n.name == entry_point)]
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Module)):
            continue
        first = node.body[0] if node.body else None
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
            node.body = node.body[1:] or [ast.Pass()]
    return ast.unparse(tree)


def function_job(entry_point: str, calls: Sequence[tuple[int, Any, Any]], tolerance: float) -> dict[str, Any]:
    return {"form": "function", "entry_point": entry_point, "calls": list(calls), "tolerance": tolerance}


def assert_job(entry_point: str, tests: list[str], tolerance: float, context: str = "") -> dict[str, Any]:
    """An assert-form job: the task's code (``context``) and its rewritten checks, as text and, for a
    sandbox interpreter of the host's version, compiled (``compiled_checks``)."""
    compiled = {"tag": sys.implementation.cache_tag, "code": compiled_checks(context, tuple(tests))}
    return {"form": "assert", "entry_point": entry_point, "tests": tests, "tolerance": tolerance, "context": context,
            "compiled": compiled}  # fmt: skip


@functools.lru_cache(maxsize=4096)
def compiled_checks(context: str, tests: tuple[str, ...]) -> str | None:
    """The task's code and its checks compiled here, once per task, as the harness would compile them
    (``[context, *tests]``, marshalled, base64): the trusted process loads them instead of compiling
    each run (a HumanEval task's checks took ~0.2 ms to compile warm, more in a fresh process), where
    its interpreter's cache tag is the host's; else it compiles the text. None when something does
    not compile: the harness then reports which, as it does for text."""
    try:
        codes = [compile(text, name, "exec", dont_inherit=True, optimize=0)
                 for text, name in [(context, "<task>"), *((t, "<check>") for t in tests)]]  # fmt: skip
    except (SyntaxError, ValueError):
        return None
    return base64.b64encode(marshal.dumps(codes)).decode()


def job_stdin(nonce: str, job: dict[str, Any]) -> str:
    return nonce + "\n" + json.dumps(job)


def parse_reports(stdout: str, nonce: str) -> list[dict[str, Any]]:
    """The harness's report lines (those carrying the nonce), in order; anything else is ignored."""
    prefix = nonce + " "
    reports: list[dict[str, Any]] = []
    for line in stdout.splitlines():
        if line.startswith(prefix):
            try:
                obj = json.loads(line[len(prefix) :])
            except ValueError:
                continue
            if isinstance(obj, dict):
                reports.append(obj)
    return reports


@dataclass
class HarnessRun:
    """What one harness run said: its reports by kind, and the sandbox's result of the run."""

    result: ExecutionResult
    load: dict[str, Any] | None = None
    cases: list[dict[str, Any]] = field(default_factory=list)  # function form, in call order
    tests: dict[int, dict[str, Any]] = field(default_factory=dict)  # assert form, by test index
    gone: str | None = None  # why the candidate's process stopped answering, if it did
    gone_signal: int | None = None  # the signal that ended it
    malformed: int = 0  # replies that were not valid encoded data
    task_error: str | None = None

    @property
    def sandbox_error(self) -> str | None:
        if self.result.verdict is Verdict.SANDBOX_ERROR:
            return self.result.sandbox_error or "sandbox error"
        if self.load is None and self.result.exit_code == 70:
            return "the grading harness could not start: " + self.result.stdout[-300:].strip()
        return None

    def ended_how(self) -> str:
        """Why a case has no answer: what ended the candidate's process, and the limit the whole run
        hit where it hit one (a candidate killed at the run's wall-clock limit ends by signal 9,
        which alone does not say why: on a loaded machine a 1 s CPU limit is not reached within a
        2 s wall-clock one, and the case read only "killed by signal 9")."""
        r = self.result
        hit = f"the run hit its {r.limit.value} limit" if r.limit is not None else None
        if self.gone is not None:
            named = self.gone_signal in (24, 25)  # SIGXCPU, SIGXFSZ: ``ended_by`` named the limit already
            return f"{self.gone}; {hit}" if hit is not None and not named else self.gone
        if hit is not None:
            return hit
        if r.signal is not None:
            return f"the run was killed by signal {r.signal}"
        return f"the run ended early (exit code {r.exit_code})"


async def run_harness(
    sandbox: SandboxAPI,
    code: str,
    job: dict[str, Any],
    limits: Limits,
    like: Program | None = None,
    environment: str | None = None,
) -> HarnessRun:
    """Run the harness on the candidate ``code`` with ``job``; its reports, sorted by kind.
    ``like``: a program whose files, environment variables, Python environment and fetch list the
    run keeps; ``environment``: the Python environment (``dojo env build``) to run in."""
    if limits.processes < 2:
        raise InputError(
            f"Limits(processes={limits.processes}) is too few to grade: the harness runs the candidate in a "
            "second process; give processes=2 or more"
        )
    nonce = new_nonce()
    files = [InputFile(path=SOLUTION_FILE, content=code.encode())]
    extra: dict[str, Any] = {"environment": environment}
    if like is not None:
        files += [f for f in like.files if f.path != SOLUTION_FILE]
        extra = {"env": like.env, "fetch": like.fetch, "environment": like.environment or environment}
    program = Program(language="python", source=harness_source(), files=files, stdin=job_stdin(nonce, job), **extra)
    result = await sandbox.run(program, limits, harness=True)
    run = HarnessRun(result=result)
    for report in parse_reports(result.stdout, nonce):
        if "load" in report and run.load is None:
            run.load = report
        elif isinstance(report.get("case"), int):
            run.cases.append(report)
        elif isinstance(report.get("test"), int):
            run.tests.setdefault(report["test"], report)
        elif "gone" in report:
            run.gone = str(report["gone"])
            run.gone_signal = report["signal"] if isinstance(report.get("signal"), int) else None
            run.malformed = int(report.get("malformed") or 0)
        elif "task_error" in report:
            run.task_error = str(report["task_error"])
    if run.gone is not None and run.gone_signal is None and result.signal is not None:
        # a judged run (``dojo.sandbox.guest.judge``): the judge is not the candidate's parent, and the
        # run's status is the candidate's own wherever it stopped answering
        run.gone_signal = result.signal
        run.gone += ended_by(result.signal)
    return run


@dataclass
class CallOutcome:
    """One function call through the harness, as a run: ``result`` says how it went (Accepted:
    the call returned ``value``, in the wire encoding), ``value`` is None otherwise."""

    result: ExecutionResult
    value: Any = None
    returned: bool = False


async def call_function(
    sandbox: SandboxAPI,
    program: Program,
    function: str,
    args: list[Any],
    kwargs: dict[str, Any],
    limits: Limits,
) -> CallOutcome:
    """Call ``function`` of the Python ``program`` on wire-encoded ``args``/``kwargs`` in the
    harness (the candidate's own process; nothing of it is trusted) and bring back its value."""
    job = function_job(function, [(0, args, kwargs)], 0.0)
    run = await run_harness(sandbox, program.source, job, limits, like=program)
    r = run.result
    if run.sandbox_error is not None:
        failed = r if r.verdict is Verdict.SANDBOX_ERROR else ExecutionResult.from_sandbox_error(run.sandbox_error)
        return CallOutcome(failed)
    base: dict[str, Any] = {"stdout": "", "stdout_truncated": False}
    if run.load is not None and run.load["load"] != "ok":
        detail = str(run.load.get("traceback") or run.load.get("error") or "")
        return CallOutcome(r.model_copy(update={**base, "verdict": Verdict.RUNTIME_ERROR, "stderr": r.stderr + detail}))
    case = run.cases[0] if run.cases else None
    if case is not None and "value" in case:
        return CallOutcome(r.model_copy(update={**base, "verdict": Verdict.ACCEPTED}), case["value"], True)
    if case is not None:
        update = {**base, "verdict": Verdict.RUNTIME_ERROR, "stderr": r.stderr + str(case.get("error", ""))}
        return CallOutcome(r.model_copy(update=update))
    if r.verdict is not Verdict.ACCEPTED:
        return CallOutcome(r.model_copy(update=base))
    if run.gone_signal == 24:  # SIGXCPU: the candidate's process used up its CPU time
        update = {**base, "verdict": Verdict.TIME_LIMIT_EXCEEDED, "limit": LimitKind.CPU_TIME}
        return CallOutcome(r.model_copy(update=update))
    update = {
        **base,
        "verdict": Verdict.RUNTIME_ERROR,
        "stderr": r.stderr + f"the call did not return: {run.ended_how()}",
    }
    return CallOutcome(r.model_copy(update=update))
