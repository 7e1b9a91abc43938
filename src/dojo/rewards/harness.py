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
- the **candidate's process** is forked from it *before* it reads its job: the job reaches the
  run on a private stdin that never entered the zygote's memory (``AsyncSandbox.run(...,
  harness=True)``), so the candidate's address space holds neither the job, nor the nonce,
  nor an earlier run's data. It keeps only fd 0 (``/dev/null``), fds 1 and 2 (the run's stderr:
  its prints never reach the report channel) and its two pipe ends; then it loads
  ``/box/solution.py`` and answers calls.

The channel: length-prefixed JSON messages. Trusted -> candidate: ``{"entry_point": name}``, then
``{"args": ..., "kwargs": ...}`` per call. Candidate -> trusted: ``{"load": "ok"|"syntax"|"error"|
"missing", ...}``, then ``{"value": ...}`` or ``{"error": "Type: message"}`` per call. Values are
encoded with exact builtin types (``dojo.tasks.values``); the trusted side decodes every message
strictly and treats anything malformed as a failed case (reported as ``malformed``). Nothing of
the candidate's process is ever called by the trusted one: its values arrive as plain data.

Function form: return values are re-encoded and reported; the grader compares them with the
expected values, which never enter the sandbox. Assert form: the check code runs in the trusted
process, in a namespace built from the task's own text (the prompt's helpers, such as HumanEval's
``poly`` or ``encode_cyclic``: never the candidate's), with ``candidate`` a proxy that calls into
the candidate's process; each ``assert`` is tallied (``rewrite_asserts``).

A candidate that exits, crashes, hangs, floods its output, forks, or kills the trusted process
fails every case it did not answer. The program's top level only defines; each slot runs it once
and every run calls ``main()``, which forks the candidate's process first thing.
"""

from __future__ import annotations

import ast
import functools
import inspect
import json
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from dojo.errors import InputError
from dojo.sandbox import ExecutionResult, InputFile, LimitKind, Limits, Program, SandboxAPI, Verdict
from dojo.tasks import values

SOLUTION_FILE = "solution.py"
MAX_MESSAGE = 16 << 20  # bytes of one channel message; a longer reply is malformed

_IMPORTS = """from __future__ import annotations
import builtins as _builtins
import json as _json
import math
import os as _os
import sys as _sys
from typing import Any
"""

_VALUES = f"""
class _LazyBase64:  # only bytes values need base64: keep its import out of every run
    def __getattr__(self, name):
        import base64 as module
        return getattr(module, name)


base64 = _LazyBase64()
MAX_MESSAGE = {MAX_MESSAGE}
BIG_INT_BITS = {values.BIG_INT_BITS}
HEX = frozenset({"".join(sorted(values.HEX))!r})

{inspect.getsource(values.encode_value)}
{inspect.getsource(values.decode_value)}
{inspect.getsource(values._is_number)}
{inspect.getsource(values.values_equal)}
"""

_MAIN = r"""

def main():
    import ctypes

    # The zygote started this process non-dumpable, with every blockable signal blocked
    # (AsyncSandbox.run(harness=True)). After an execve (strict isolation: a fresh interpreter)
    # the kernel has made it dumpable again: undo that, and refuse to go on if it cannot be undone.
    libc = ctypes.pythonapi  # the process's own symbols: libc's prctl and fork
    if libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) != 0:
        libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    if libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) != 0:
        _os.write(1, b"dojo harness: the trusted process is dumpable\n")
        _os._exit(70)
    call_r, call_w = _os.pipe()
    reply_r, reply_w = _os.pipe()
    # glibc's fork without CPython's after-fork hooks (this process has one thread): ~0.2 ms less
    pid = libc.fork()
    if pid < 0:
        _os.write(1, b"dojo harness: fork failed\n")
        _os._exit(70)
    if pid == 0:
        candidate_process(call_r, reply_w)
        _os._exit(0)
    dojo_main(pid, call_r, call_w, reply_r, reply_w)


if __name__ == "__main__":  # a preloaded harness (the zygote's fast path) is called as main()
    main()
"""

_COMMON = r'''
PR_GET_DUMPABLE, PR_SET_DUMPABLE = 3, 4

CALL_FD, REPLY_FD = 3, 4  # the channel's ends, in the candidate's process


class Malformed(Exception):
    """A message from the candidate's process that is not valid encoded data."""


class CandidateGone(BaseException):
    """The candidate's process ended (or broke the channel): no later call can be answered.
    A BaseException, so that no ``except Exception`` in check code can swallow it."""


class CandidateError(Exception):
    """The candidate's function raised an exception that is not a builtin one."""


def send(fd, obj):
    data = _json.dumps(obj, allow_nan=False, separators=(",", ":")).encode()
    data = len(data).to_bytes(4, "big") + data
    while data:
        data = data[_os.write(fd, data):]


def read_n(fd, n):
    chunks = []
    while n:
        chunk = _os.read(fd, min(n, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def receive(fd):
    """One message as raw bytes; None at the end of the channel; Malformed when too long."""
    head = read_n(fd, 4)
    if head is None:
        return None
    n = int.from_bytes(head, "big")
    if n > MAX_MESSAGE:
        raise Malformed("message of " + str(n) + " bytes")
    return read_n(fd, n)


def describe(e):
    try:
        return (type(e).__name__ + ": " + str(e))[:500]
    except BaseException:
        return "an exception that cannot be described"


'''

_CANDIDATE_SIDE = r"""
# ------------------------------------------------------------------------------------------------
# The candidate's process. Everything from here on is untrusted: the trusted process believes
# nothing it says without checking it.
# ------------------------------------------------------------------------------------------------

def candidate_process(call_r, reply_w):
    import fcntl
    import signal
    try:
        call = fcntl.fcntl(call_r, fcntl.F_DUPFD, 16)
        reply = fcntl.fcntl(reply_w, fcntl.F_DUPFD, 16)
        null = _os.open("/dev/null", _os.O_RDONLY)
        _os.dup2(null, 0)
        _os.dup2(2, 1)  # the report channel is the trusted process's fd 1: never the candidate's
        _os.dup2(call, CALL_FD)
        _os.dup2(reply, REPLY_FD)
        _os.closerange(REPLY_FD + 1, 1 << 16)
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
    except BaseException:
        _os._exit(125)
    try:
        serve_calls()
    except BaseException:
        pass
    _os._exit(0)


def serve_calls():
    first = receive(CALL_FD)
    if first is None:
        return
    entry_point = _json.loads(first)["entry_point"]
    with open("/box/solution.py", "rb") as f:
        source = f.read()
    ns = {"__name__": "solution", "__file__": "/box/solution.py", "__builtins__": _builtins}
    try:
        code = compile(source, "/box/solution.py", "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as e:
        send(REPLY_FD, {"load": "syntax", "error": describe(e)})
        return
    try:
        exec(code, ns)
    except BaseException as e:
        import traceback
        tb = "".join(traceback.format_exception(type(e), e, e.__traceback__.tb_next))[-2000:]
        send(REPLY_FD, {"load": "error", "error": describe(e), "traceback": tb})
        return
    fn = ns.get(entry_point)
    if not callable(fn):
        send(REPLY_FD, {"load": "missing", "error": "no function named " + entry_point})
        return
    send(REPLY_FD, {"load": "ok"})
    while True:
        raw = receive(CALL_FD)
        if raw is None:
            return
        message = _json.loads(raw)
        try:
            args = decode_value(message["args"])
            kwargs = decode_value(message["kwargs"])
            answer = {"value": encode_value(fn(*args, **kwargs))}
        except BaseException as e:
            answer = {"error": describe(e)}
        for stream in (_sys.stdout, _sys.stderr):
            try:
                stream.flush()
            except BaseException:
                pass
        send(REPLY_FD, answer)


"""

_TRUSTED_SIDE = r'''
# ------------------------------------------------------------------------------------------------
# The trusted process.
# ------------------------------------------------------------------------------------------------

def reject_constant(name):
    raise ValueError("bare " + name + " is not encoded data")


def parse_message(raw):
    """A message from the candidate's process: a non-empty JSON object; Malformed otherwise."""
    try:
        obj = _json.loads(raw.decode("utf-8"), parse_constant=reject_constant)
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise Malformed("not JSON: " + describe(e))
    if type(obj) is not dict or not obj:
        raise Malformed("not a message object")
    return obj


class Candidate:
    """The trusted side of the channel: calls go out as data, answers come back checked."""

    def __init__(self, pid, call_w, reply_r):
        self.pid, self.call_w, self.reply_r = pid, call_w, reply_r
        self.gone = None  # why no more calls can be answered
        self.signal = None  # the signal that ended the candidate's process, if one did
        self.malformed = 0

    def ended(self, why, eof=False):
        """Stop the candidate's process for good, say why (with how it ended), and raise
        CandidateGone. ``eof``: it closed the channel itself (its exit code is worth telling)."""
        if self.gone is None:
            self.gone = why
            try:
                _os.kill(self.pid, 9)
            except OSError:
                pass
            try:
                _, status = _os.waitpid(self.pid, 0)
                if _os.WIFSIGNALED(status):
                    sig = self.signal = _os.WTERMSIG(status)
                    named = {24: "its cpu limit", 25: "its file_size limit"}.get(sig)
                    self.gone = why + (" (it hit " + named + ")" if named else " (killed by signal " + str(sig) + ")")
                elif _os.WIFEXITED(status) and eof:
                    self.gone = why + " (exit code " + str(_os.WEXITSTATUS(status)) + ")"
            except OSError:
                pass
        raise CandidateGone(self.gone)

    def request(self, obj):
        if self.gone is not None:
            raise CandidateGone(self.gone)
        try:
            send(self.call_w, obj)
        except OSError:
            self.ended("the candidate's process ended", eof=True)
        try:
            raw = receive(self.reply_r)
        except Malformed as e:
            self.malformed += 1
            self.ended("malformed reply: " + str(e))
        if raw is None:
            self.ended("the candidate's process ended", eof=True)
        try:
            return parse_message(raw)
        except Malformed as e:
            self.malformed += 1
            self.ended("malformed reply: " + str(e))

    def load(self, entry_point):
        reply = self.request({"entry_point": entry_point})
        status = reply.get("load")
        if status not in ("ok", "syntax", "error", "missing") or set(reply) - {"load", "error", "traceback"}:
            self.malformed += 1
            self.ended("malformed reply to loading the solution")
        out = {"load": status}
        for key in ("error", "traceback"):
            if key in reply:
                out[key] = str(reply[key])[:2000]
        return out

    def call(self, args, kwargs):
        """The candidate's return value, decoded; raises what it raised (as data: a builtin
        exception type of that name, else CandidateError), or CandidateGone."""
        reply = self.request({"args": args, "kwargs": kwargs})
        if len(reply) == 1 and "value" in reply:
            try:
                return decode_value(reply["value"])
            except (ValueError, TypeError, RecursionError) as e:
                self.malformed += 1
                self.ended("malformed value: " + describe(e))
        if len(reply) == 1 and type(reply.get("error")) is str:
            raise exception_from(reply["error"])
        self.malformed += 1
        self.ended("malformed reply to a call")


def exception_from(text):
    """The candidate's exception, for the check to see: its builtin type when it has one, except
    the ones that steer control flow (a StopIteration raised inside ``map(candidate, ...)`` would
    end the check's loop early, as if its remaining asserts were not there)."""
    name, _, message = text.partition(": ")
    kind = getattr(_builtins, name, None)
    steering = (StopIteration, StopAsyncIteration)
    if type(kind) is type and issubclass(kind, Exception) and not issubclass(kind, steering):
        try:
            return kind(message)
        except BaseException:
            pass
    return CandidateError(text)


def dojo_main(pid, call_r, call_w, reply_r, reply_w):
    import random

    random.seed()  # the candidate's process has a copy of the state it had until now
    _os.close(call_r)
    _os.close(reply_w)
    # Only now does anything secret enter this process.
    nonce = _sys.stdin.readline().strip()
    job = _json.loads(_sys.stdin.read())
    _os.close(0)
    report_fd = _os.dup(1)
    _os.dup2(2, 1)  # whatever the check code prints goes to stderr, not to the report channel

    def emit(obj):
        data = (nonce + " " + _json.dumps(obj) + "\n").encode()
        while data:
            data = data[_os.write(report_fd, data):]

    candidate = Candidate(pid, call_w, reply_r)
    try:
        run_job(job, candidate, emit)
    except CandidateGone:
        pass
    if candidate.gone is not None:
        emit({"gone": candidate.gone, "signal": candidate.signal, "malformed": candidate.malformed})
    if candidate.gone is None:  # reap it, so that the run's CPU time includes the candidate's
        try:
            _os.kill(pid, 9)
            _os.waitpid(pid, 0)
        except OSError:
            pass


def run_job(job, candidate, emit):
    loaded = candidate.load(job["entry_point"])
    emit(loaded)
    if loaded["load"] != "ok":
        return
    if job["form"] == "function":
        for index, args, kwargs in job["calls"]:
            try:
                value = candidate.call(args, kwargs)
                emit({"case": index, "value": encode_value(value)})
            except CandidateGone:
                raise
            except BaseException as e:
                emit({"case": index, "error": describe(e)})
        return
    tol = job.get("tolerance", 1e-6)
    tally = [0, 0]

    def _dojo_tally(ok):
        tally[0 if ok is True else 1] += 1

    def _dojo_eq(a, b):
        encode_value(a)
        encode_value(b)
        return values_equal(a, b, tol)

    def _dojo_truth(x):
        return type(x) is bool and x

    def _dojo_falsity(x):
        return type(x) is bool and not x

    def proxy(*args, **kwargs):
        return candidate.call(encode_value(list(args)), encode_value(kwargs))

    base = {"__name__": "dojo_check", "__builtins__": _builtins}
    try:
        exec(compile(job.get("context") or "", "<task>", "exec", dont_inherit=True), base)
    except BaseException as e:
        emit({"task_error": "the task's own code failed: " + describe(e)})
        return
    base.update({"_dojo_tally": _dojo_tally, "_dojo_eq": _dojo_eq, "_dojo_truth": _dojo_truth,
                 "_dojo_falsity": _dojo_falsity, job["entry_point"]: proxy})
    for index, test in enumerate(job["tests"]):
        tally[0] = tally[1] = 0
        tns = dict(base)
        try:
            exec(compile(test, "<check>", "exec", dont_inherit=True), tns)
            tns["check"](proxy)
            emit({"test": index, "passed": tally[0], "failed": tally[1], "completed": True})
        except BaseException as e:
            emit({"test": index, "passed": tally[0], "failed": tally[1], "completed": False,
                  "error": describe(e)})

'''

HARNESS_SOURCE = _IMPORTS + _VALUES + _COMMON + _CANDIDATE_SIDE + _TRUSTED_SIDE + _MAIN
"""The harness program. Its top level only defines (``main()`` runs it), so the zygote can run it
once per slot and hand every run the defined functions (``AsyncSandbox.run(harness=True)``)."""


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
    return {"form": "assert", "entry_point": entry_point, "tests": tests, "tolerance": tolerance, "context": context}


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
        """Why a case has no answer: what ended the candidate's process, or the whole run."""
        if self.gone is not None:
            return self.gone
        r = self.result
        if r.limit is not None:
            return f"the run hit its {r.limit.value} limit"
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
    program = Program(language="python", source=HARNESS_SOURCE, files=files, stdin=job_stdin(nonce, job), **extra)
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
