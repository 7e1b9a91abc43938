"""``scicode``: SciCode's 15 dev problems (``nvidia-scicode==26.3``, ``problems_dev.jsonl``), the only
ones that ship reference code: one task per step (50) and one per whole problem (15).

A task is an ``analysis`` task with an entry point: the candidate writes the step's function (or,
for a whole problem, every step's function); dojo's capture driver
(``dojo.rewards.programs.capture_driver``) runs it in the sandbox after the task's prelude (the
problem's imports and, for a step, the earlier steps' reference code, which the prompt shows too),
then each of SciCode's test cases. SciCode compares with targets from an HDF5 file it downloads;
here the targets are the reference's own values: every ``assert`` of a test case is rewritten here
(``rewrite_case``) into a capture of the values it compares, leaving ``target`` out, and each test
is ``"reference": true``: the same capture of the reference, run in its own sandbox run (cached per
task), is what the candidate's values must match, on the host, within ``np.allclose``'s default
tolerances (rtol 1e-5, atol 1e-8), arrays by shape and values, booleans exactly.

How each kind of assert becomes a capture:

- ``np.allclose(x, target)``, ``cmp_tuple_or_list(x, target)``, ``(x) == target``: ``x``;
- ``np.allclose(d(c)[0], target[0]) and ...``: each side that is not the target;
- ``are_equivalent(points, target)`` (a set of points in any order): ``points``, its rows sorted
  in both runs (mode ``rows``);
- problem 78's asserts inside test functions, with no target (``np.allclose(output,
  expected_output)``, ``np.isclose(final_state[0], expected_theta, atol=0.1)``, ``final_state[0] <
  state[0]``, ``not np.isnan(final_state).any()``): every operand compared, so the candidate's
  values must equal the reference's at the default tolerances, stricter than SciCode's own
  property checks for 78.2 (a correct RK4 as the step states it agrees to rounding).

A case whose assert cannot be rewritten would be left out of its task (none in the dev set: a test
checks it). Nothing of the package is imported: the data file is read from the wheel.
"""

from __future__ import annotations

import ast
import functools
import json
import random
from typing import Any

from dojo.sandbox import Limits
from dojo.tasks.analysis import ANALYSIS_ENVIRONMENT, environment_ref
from dojo.tasks.model import Task, TaskMetadata, TestCase
from dojo.tasks.wheel_data import wheel_data

DISTRIBUTION, VERSION = "nvidia-scicode", "26.3"
PARTS = ("steps", "problems")
RTOL, ATOL = 1e-5, 1e-8  # np.allclose's defaults, SciCode's comparison
# The long simulations (47.4's Monte Carlo, 51.4's molecular dynamics: 1,000 steps of 32 particles
# in Python) take seconds.
SCICODE_LIMITS = Limits(wall_time=60.0, cpu_time=40.0, memory=4 << 30, file_size=32 << 20)
LONG_RUNS = frozenset({"47.4", "47", "51.4", "51"})  # 16-32 s of CPU alone; minutes of wall under load
LONG_LIMITS = SCICODE_LIMITS.merged(wall_time=600.0, cpu_time=120.0)
CAPTURE = "__dojo_capture__"


@functools.cache
def scicode_problems() -> list[dict[str, Any]]:
    """SciCode's dev problems as the wheel ships them."""
    data = wheel_data(DISTRIBUTION, VERSION, "scicode/data", "scicode")
    lines = (data / "problems_dev.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _mentions_target(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Name) and n.id == "target" for n in ast.walk(node))


def _operands(node: ast.expr) -> list[ast.expr]:
    """The values an assert's test compares, less the target."""
    if isinstance(node, ast.BoolOp):
        return [o for v in node.values for o in _operands(v)]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return _operands(node.operand)
    if isinstance(node, ast.Compare):
        return [v for v in [node.left, *node.comparators] if not _mentions_target(v)]
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Call) and not node.args:
            return _operands(func.value)  # np.isnan(x).any(): x
        return [a for a in node.args if not _mentions_target(a)]
    return [node]


def _mode(node: ast.expr) -> str:
    func = node.func if isinstance(node, ast.Call) else None
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    return "rows" if name == "are_equivalent" else "values"


class _Captures(ast.NodeTransformer):
    def __init__(self) -> None:
        self.count = 0

    def visit_ImportFrom(self, node: ast.ImportFrom) -> ast.stmt | None:
        # SciCode's comparison helpers (scicode.compare.cmp), used by the asserts only
        return None if (node.module or "").split(".")[0] == "scicode" else node

    def visit_Assert(self, node: ast.Assert) -> ast.stmt:
        operands = _operands(node.test)
        if not operands:
            raise ValueError(f"nothing to capture in: {ast.unparse(node)}")
        self.count += 1
        call = ast.Call(
            func=ast.Name(id=CAPTURE, ctx=ast.Load()),
            args=[ast.Constant(_mode(node.test)), ast.List(elts=operands, ctx=ast.Load())],
            keywords=[],
        )
        return ast.copy_location(ast.Expr(value=call), node)


def rewrite_case(code: str) -> str:
    """A test case's code with each ``assert`` a capture of its operands (see the module doc);
    ValueError when one cannot be rewritten or the target is still read."""
    tree = ast.parse(code)
    captures = _Captures()
    tree = ast.fix_missing_locations(captures.visit(tree))
    if captures.count == 0:
        raise ValueError("the case has no assert")
    if _mentions_target(tree):
        raise ValueError("the case reads the target outside an assert")
    return ast.unparse(tree)


def _header(step: dict[str, Any]) -> str:
    return f"{step['function_header'].rstrip()}\n\n{step['return_line'].rstrip()}"


def _tests(cases: list[str]) -> list[TestCase]:
    tests = []
    for i, case in enumerate(cases):
        try:
            code = rewrite_case(case)
        except (SyntaxError, ValueError):
            continue
        expected = {"field": f"cases.{i}", "reference": True, "rel": RTOL, "abs": ATOL}
        tests.append(TestCase(code=code, expected=expected))
    return tests


GUIDELINES = (
    "Use only these dependencies (they are imported for you; do not import anything else):\n"
    "```python\n{deps}\n```\nAnswer with the code in one ```python block: the function{s} above, complete."
)


def _task(problem: dict[str, Any], index: int | None) -> Task:
    deps = problem["required_dependencies"].strip()
    steps = problem["sub_steps"]
    pid = problem["problem_id"]
    if index is None:
        listing = "\n\n".join(f"Step {s['step_number']}: {s['step_description_prompt'].strip()}\n```python\n"
                              f"{_header(s)}\n```" for s in steps)  # fmt: skip
        prompt = (
            f"{problem['problem_description_main'].strip()}\n\n{problem['problem_io'].strip()}\n\n"
            f"Write every function of these steps (each may call the earlier ones):\n\n{listing}\n\n"
            + GUIDELINES.format(deps=deps, s="s")
        )
        prelude, reference, entry = deps, problem["general_solution"], steps[-1]["function_header"]
        tests, task_id, tags = _tests(problem["general_tests"]), f"scicode/{pid}", ["problem"]
    else:
        step = steps[index]
        sn = step["step_number"]
        earlier = "\n\n".join(s["ground_truth_code"].strip() for s in steps[:index])
        given = f"The earlier steps' functions are defined already:\n```python\n{earlier}\n```\n\n" if earlier else ""
        prompt = (
            f"{problem['problem_description_main'].strip()}\n\n{given}Now step {step['step_number']}: "
            f"{step['step_description_prompt'].strip()}\n```python\n{_header(step)}\n```\n\n"
            + GUIDELINES.format(deps=deps, s="")
        )
        prelude, reference, entry = f"{deps}\n\n{earlier}\n", step["ground_truth_code"], step["function_header"]
        tests, task_id, tags = _tests(step["test_cases"]), f"scicode/{sn}", ["step"]
    name = entry.split("def ", 1)[1].split("(", 1)[0].strip()
    return Task(
        id=task_id,
        domain="science",
        form="analysis",
        prompt=prompt,
        entry_point=name,
        tests=tests,
        reference=f"```python\n{reference.strip()}\n```",
        limits=LONG_LIMITS if task_id.removeprefix("scicode/") in LONG_RUNS else SCICODE_LIMITS,
        environment=environment_ref(ANALYSIS_ENVIRONMENT),
        metadata=TaskMetadata(
            source="scicode",
            tags=[*tags, f"problem{pid}", problem["problem_name"]],
            prelude=prelude,
            difficulty=round(len(steps) / 11, 3) if index is None else round(index / max(1, len(steps)), 3),
        ),
    )


def load_scicode(part: str = "", n: int | None = None, seed: int = 0) -> list[Task]:
    """SciCode's dev tasks: ``steps``, ``problems`` or both (``""``); ``n`` drawn by ``seed``."""
    if part not in ("", *PARTS):
        raise ValueError(f"scicode: the part is one of {', '.join(PARTS)} (or none: both), not {part!r}")
    tasks = [
        _task(p, i)
        for p in scicode_problems()
        for i in ([*range(len(p["sub_steps"]))] if part != "problems" else []) + ([None] if part != "steps" else [])
    ]
    tasks = [t for t in tasks if t.tests]
    if n is not None:
        tasks = random.Random(seed).sample(tasks, min(n, len(tasks)))
    return tasks
