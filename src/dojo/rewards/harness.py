"""The program a grader runs in the sandbox for function- and assert-form tasks.

Layout of a grading run: the candidate's code is ``/box/solution.py``; ``/box/main.py`` is this
harness. The harness reads a per-run nonce and its job (calls, or check code) from stdin *before*
the candidate's code runs, so neither is on disk for the candidate to read. It snapshots the
builtins, runs the candidate in a namespace of its own (defining ``check`` or ``_dojo_*`` there
changes nothing), restores the builtins after the candidate's code and after every call, and
reports each result as a line ``<nonce> <json>`` on stdout. The grader trusts only lines with the
nonce; a run that ends without the final ``{"done": true}`` line (``sys.exit``, ``os._exit``, a
crash) fails every case it did not report.

Function form: return values are encoded with exact-type checks (``dojo.rewards.values``) and
compared by the grader; expected values never enter the sandbox. Assert form: the grader rewrites
each ``assert`` of the check code (``rewrite_asserts``) so that it is tallied instead of raised,
``==`` compares as data, and a truth value must be builtin data; the tally goes home on the same
nonce channel.
"""

from __future__ import annotations

import ast
import inspect
import json
import secrets
from typing import Any

from dojo.rewards import values

SOLUTION_FILE = "solution.py"

_PRELUDE = f"""from __future__ import annotations
import builtins as _builtins
import json as _json
import math
import os as _os
import sys as _sys
from typing import Any


class _LazyBase64:  # only bytes values need base64: keep its import out of every run
    def __getattr__(self, name):
        import base64 as module
        return getattr(module, name)


base64 = _LazyBase64()

{inspect.getsource(values.encode_value)}
{inspect.getsource(values.decode_value)}
{inspect.getsource(values._is_number)}
{inspect.getsource(values.values_equal)}
"""

_MAIN = r"""

def _dojo_main():
    nonce = _sys.stdin.readline().strip()
    job = _json.loads(_sys.stdin.read())
    saved = dict(_builtins.__dict__)
    write, dumps, exact, tol = _os.write, _json.dumps, type, job.get("tolerance", 1e-6)

    def restore():
        _builtins.__dict__.clear()
        _builtins.__dict__.update(saved)

    def emit(obj):
        try:
            _sys.stdout.flush()
        except BaseException:
            pass
        data = (nonce + " " + dumps(obj) + "\n").encode()
        while data:
            data = data[write(1, data):]

    def describe(e):
        return (exact(e).__name__ + ": " + str(e))[:500]

    with open("/box/solution.py", "rb") as f:
        source = f.read()
    ns = {"__name__": "solution", "__file__": "/box/solution.py", "__builtins__": _builtins}
    try:
        code = compile(source, "/box/solution.py", "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as e:
        emit({"load": "syntax", "error": describe(e)})
        return
    try:
        exec(code, ns)
    except BaseException as e:
        restore()
        import traceback
        tb = "".join(traceback.format_exception(exact(e), e, e.__traceback__.tb_next))[-2000:]
        emit({"load": "error", "error": describe(e), "traceback": tb})
        return
    restore()
    fn = ns.get(job["entry_point"])
    if not callable(fn):
        emit({"load": "missing", "error": "no function named " + job["entry_point"]})
        return
    emit({"load": "ok"})
    if job["form"] == "function":
        for index, args, kwargs in job["calls"]:
            try:
                value = fn(*decode_value(args), **decode_value(kwargs))
                restore()
                emit({"case": index, "value": encode_value(value)})
            except BaseException as e:
                restore()
                emit({"case": index, "error": describe(e)})
    else:
        tally = [0, 0]

        def _dojo_tally(ok):
            tally[0 if ok is True else 1] += 1

        def _dojo_eq(a, b):
            encode_value(a)
            encode_value(b)
            return values_equal(a, b, tol)

        def _dojo_truth(x):
            encode_value(x)
            return bool(x) is True

        def candidate(*args, **kwargs):  # builtins come back after every call the check makes
            try:
                return fn(*args, **kwargs)
            finally:
                restore()

        for index, test in enumerate(job["tests"]):
            tally[0] = tally[1] = 0
            tns = dict(ns)
            tns.update({"__name__": "dojo_check", "_dojo_tally": _dojo_tally, "_dojo_eq": _dojo_eq,
                        "_dojo_truth": _dojo_truth})
            try:
                exec(compile(test, "<check>", "exec", dont_inherit=True), tns)
                tns["check"](candidate)
                restore()
                emit({"test": index, "passed": tally[0], "failed": tally[1], "completed": True})
            except BaseException as e:
                restore()
                emit({"test": index, "passed": tally[0], "failed": tally[1], "completed": False,
                      "error": describe(e)})
    emit({"done": True})


_dojo_main()
"""

HARNESS_SOURCE = _PRELUDE + _MAIN


def new_nonce() -> str:
    return secrets.token_hex(16)


class _AssertRewriter(ast.NodeTransformer):
    """``assert T`` -> tally whether T is true as builtin data; ``a == b`` -> compare as data."""

    def __init__(self) -> None:
        self.count = 0

    def visit_Assert(self, node: ast.Assert) -> ast.AST:
        if isinstance(node.test, ast.Constant):  # HumanEval's `assert True, "..."`: checks nothing
            return ast.copy_location(ast.Pass(), node)
        self.count += 1
        test = _CompareRewriter().visit(node.test)
        tally_ok = ast.Expr(
            ast.Call(
                ast.Name("_dojo_tally", ast.Load()),
                [ast.Call(ast.Name("_dojo_truth", ast.Load()), [test], [])],
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
    """The check code with every assert tallied (see module doc); also how many asserts it has."""
    tree = ast.parse(test_code)
    rewriter = _AssertRewriter()
    tree = rewriter.visit(tree)
    ast.fix_missing_locations(tree)
    return ast.unparse(tree), rewriter.count


def function_job(entry_point: str, calls: list[tuple[int, Any, Any]], tolerance: float) -> dict[str, Any]:
    return {"form": "function", "entry_point": entry_point, "calls": calls, "tolerance": tolerance}


def assert_job(entry_point: str, tests: list[str], tolerance: float) -> dict[str, Any]:
    return {"form": "assert", "entry_point": entry_point, "tests": tests, "tolerance": tolerance}


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
