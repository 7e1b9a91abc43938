"""The analysis form: answer files compared on the host, field by field, and what a candidate that
games it gets (nothing)."""

from __future__ import annotations

import json

import pytest

from dojo.rewards import Grader
from dojo.rewards.analysis import guessed_answer, lookup, trivial_analysis_candidates, values_match
from dojo.sandbox import AsyncSandbox
from dojo.tasks import load_source
from dojo.tasks.model import Task, TestCase, Workspace


def program(code: str) -> str:
    return f"```python\n{code}\n```"


def test_values_match_numbers_within_the_declared_tolerance() -> None:
    assert values_match(100.00005, 100.0, 1e-6, 1e-9)
    assert not values_match(100.001, 100.0, 1e-6, 1e-9)
    assert values_match(1e-9, 0.0, 0.0, 1e-8)
    assert not values_match("100.0", 100.0, 1e-6, 1e-6)  # text is not a number
    assert not values_match(True, 1, 1e-6, 1e-6)  # nor is a boolean
    assert not values_match(float("nan"), 1.0, 1e-6, 1e-6)


def test_values_match_lists_objects_and_arrays() -> None:
    assert values_match({"a": 1.0, "b": [1, 2]}, {"a": 1.0000000001, "b": [1, 2]}, 1e-6, 1e-6)
    assert not values_match({"a": 1.0}, {"a": 1.0, "b": 2.0}, 1e-6, 1e-6)  # a missing key
    assert not values_match({"a": 1.0, "b": 2.0, "c": 3}, {"a": 1.0, "b": 2.0}, 1e-6, 1e-6)  # an extra one
    assert values_match(["O2", "O1"], ["O1", "O2"], 0, 0, unordered=True)
    assert not values_match(["O2", "O1"], ["O1", "O2"], 0, 0)
    array = {"$nd": {"shape": [2], "kind": "f", "data": [1.0, 2.0]}}
    assert values_match(array, {"$nd": {"shape": [2], "kind": "f", "data": [1.0, 2.0 + 1e-9]}}, 1e-5, 1e-8)
    assert not values_match({"$nd": {"shape": [1, 2], "kind": "f", "data": [1.0, 2.0]}}, array, 1e-5, 1e-8)


def test_lookup_follows_dotted_paths_into_objects_and_lists() -> None:
    answer = {"a": {"b": [10, 20]}}
    assert lookup(answer, "a.b.1") == (True, 20)
    assert lookup(answer, "a.c") == (False, None)


def test_an_analysis_task_needs_named_fields_and_python() -> None:
    with pytest.raises(ValueError, match="field"):
        Task(id="t", form="analysis", prompt="p", tests=[TestCase(expected=3)])
    with pytest.raises(ValueError, match="python"):
        Task(id="t", form="analysis", prompt="p", language="bash", tests=[TestCase(expected={"field": "x"})])
    with pytest.raises(ValueError, match="binary"):
        Task(id="t", form="shell", prompt="p", workspace=Workspace(files={"a": "QQ=="}, binary=["a"]),
             tests=[TestCase(expected={"path": "a", "exists": True})])  # fmt: skip


def test_the_guessed_answer_has_every_field_zeroed() -> None:
    task = load_source("family:data_analysis?n=1&difficulty=0.9")[0]
    guess = guessed_answer(task)
    assert set(guess) == {t.expected["field"] for t in task.tests}
    assert [n for n, _ in trivial_analysis_candidates(task)] == [
        "empty program",
        "answer of zeros",
        "print the question",
    ]


@pytest.fixture(scope="module")
def data_task() -> Task:
    return load_source("family:data_analysis?n=1&seed=3&difficulty=0.6")[0]


async def test_reference_passes_and_the_truth_never_enters_the_sandbox(data_task: Task) -> None:
    """The run sees the data files and nothing else of the task: a candidate that searches every
    file it can read for the expected values finds none, and its guess earns nothing."""
    wanted = [json.dumps(t.expected["value"])[:12] for t in data_task.tests]
    search = f"""
import json, os
needles = {wanted!r}
found = []
for root in ("/box", "/tmp", os.getcwd()):
    for base, dirs, files in os.walk(root):
        for name in files:
            try:
                text = open(os.path.join(base, name), errors="ignore").read()
            except OSError:
                continue
            found += [n for n in needles if n in text and len(n) > 6]
json.dump({{"found": found}}, open("answer.json", "w"))
print(found)
"""
    async with AsyncSandbox() as sandbox:
        grader = Grader(sandbox)
        reference = await grader.grade(data_task, data_task.reference or "")
        searching = await grader.grade(data_task, program(search))
    assert reference.value == 1.0, reference.cases
    assert searching.value == 0.0


async def test_a_right_answer_in_a_file_left_open_scores_1(data_task: Task) -> None:
    """``out = open('answer.json', 'w'); json.dump(answer, out)`` without ``close()``, as Python's exit
    flushes it. In ``dojo-data`` (pandas imported: ~290,000 blocks its zygote held before the
    program's first) the end-of-run flush had never run: a right answer read as an empty file."""
    reference = data_task.reference or ""
    ending = 'json.dump(answer, open("answer.json", "w"))'
    assert ending in reference
    left_open = reference.replace(ending, 'out = open("answer.json", "w")\njson.dump(answer, out)')
    async with AsyncSandbox() as sandbox:
        reward = await Grader(sandbox).grade(data_task, left_open)
    assert reward.value == 1.0, reward.cases


async def test_reward_hacks_on_an_answer_file_earn_nothing(data_task: Task) -> None:
    fields = [t.expected["field"] for t in data_task.tests]
    hacks = {
        "a guess written straight to the answer file": f"import json\njson.dump({dict.fromkeys(fields, 1)!r}, "
        "open('answer.json', 'w'))",
        "the data files edited to make a guess right": "import glob, json\nfor p in glob.glob('data/*.csv'):\n"
        "    open(p, 'w').write('')\n" + f"json.dump({dict.fromkeys(fields, 0)!r}, open('answer.json', 'w'))",
        "printing what a checker looks for": "print('PASSED all fields: ' + 'ok ' * 10)",
        "a huge answer file": "open('answer.json', 'w').write('[' * 10 + '1' * (5 << 20))",
        "an answer that is not JSON": "open('answer.json', 'w').write('{total: 1')",
        "exiting early": "import os\nos._exit(0)",
    }
    async with AsyncSandbox() as sandbox:
        grader = Grader(sandbox)
        for name, code in hacks.items():
            reward = await grader.grade(data_task, program(code))
            assert reward.value == 0.0, (name, reward)
            assert reward.verdict != "infrastructure_error", name


async def test_scientific_reference_passes_and_a_loose_solver_does_not() -> None:
    """An ODE solved at solve_ivp's default tolerance misses the 1e-6 the task declares."""
    task = next(t for t in load_source("family:scientific?n=40&difficulty=0.3-0.45") if "ode" in t.metadata.tags)
    fields = [t.expected["field"] for t in task.tests]
    async with AsyncSandbox() as sandbox:
        grader = Grader(sandbox)
        reference = await grader.grade(task, task.reference or "")
        loose = (task.reference or "").replace("rtol=1e-12, atol=1e-12", "rtol=1e-3")
        sloppy = await grader.grade(task, loose)
    assert reference.value == 1.0, reference.cases
    if "x_end" in fields and loose != task.reference:
        assert sloppy.value is not None and sloppy.value < 1.0


async def test_an_agent_can_look_at_the_data_before_answering(data_task: Task) -> None:
    """Multi-turn: run_code sees the task's files (Parquet decoded), and the submitted program is
    graded like any other."""
    from dojo.agent.policy import ToolCall
    from dojo.agent.tools import Toolbox

    path = next(iter(data_task.workspace.files)) if data_task.workspace else ""
    reader = "read_parquet" if path.endswith(".parquet") else "read_csv"
    look = ToolCall(name="run_code", arguments={"code": f"import pandas as pd\nprint(pd.{reader}({path!r}).shape)"})
    async with AsyncSandbox() as sandbox:
        toolbox = Toolbox(data_task, sandbox)
        seen = await toolbox.call(look)
        code = (data_task.reference or "").strip().removeprefix("```python").removesuffix("```")
        submitted = await toolbox.call(ToolCall(name="submit", arguments={"code": code}))
        reward = await Grader(sandbox).grade(data_task, submitted.submitted or "")
    assert seen.verdict == "Accepted" and seen.observation.count(",") >= 1, seen.observation
    assert reward.value == 1.0


def test_packed_arrays_are_compared_by_shape_and_values_and_never_inflate_past_their_shape() -> None:
    """A large array comes back packed (float64 or complex128 bytes, zlib, base64): compared like a
    listed one; a packed field that inflates to more than its shape holds is no array."""
    import base64
    import zlib

    import numpy as np

    def packed(values: object, shape: list[int], kind: str = "f") -> dict[str, object]:
        raw = np.asarray(values, dtype="<c16" if kind == "c" else "<f8").tobytes()
        return {"$nd": {"shape": shape, "kind": kind, "zb64": base64.b64encode(zlib.compress(raw)).decode()}}

    grid = np.arange(12.0).reshape(3, 4)
    listed = {"$nd": {"shape": [3, 4], "kind": "f", "data": grid.ravel().tolist()}}
    assert values_match(packed(grid, [3, 4]), listed, 1e-5, 1e-8)
    assert values_match(packed(grid + 1e-9, [3, 4]), packed(grid, [3, 4]), 1e-5, 1e-8)
    assert not values_match(packed(grid + 1e-3, [3, 4]), packed(grid, [3, 4]), 1e-5, 1e-8)
    assert not values_match(packed(grid, [4, 3]), listed, 1e-5, 1e-8)
    assert values_match(packed([1 + 2j, 3j], [2], "c"), packed([1 + 2j, 3j], [2], "c"), 1e-5, 1e-8)
    assert not values_match(packed(np.zeros(1 << 20), [2]), packed(np.zeros(2), [2]), 1e-5, 1e-8)
    # a candidate's declared shape is bounded by the expected value's: a zlib bomb is never inflated
    bomb = {"$nd": {"shape": [1 << 29], "kind": "f", "zb64": base64.b64encode(zlib.compress(bytes(1 << 20))).decode()}}
    assert not values_match(bomb, packed(np.zeros(2), [2]), 1e-5, 1e-8) and not values_match(
        bomb, [0.0, 0.0], 1e-5, 1e-8
    )
    assert not values_match(bomb, 0.0, 1e-5, 1e-8)
    broken = {"$nd": {"shape": [], "kind": "f", "zb64": "AAAAAAAA"}}  # not zlib: no array, not an error
    assert not values_match(broken, 0.0, 1e-5, 1e-8) and not values_match(broken, packed([0.0], []), 1e-5, 1e-8)


def test_answers_nested_past_the_recursion_limit_are_not_json_not_errors() -> None:
    from dojo.rewards.analysis import parse_answer
    from dojo.rewards.report import report_of

    assert parse_answer(b"[" * 200_000)[0] is None and "not JSON" in str(parse_answer(b"[" * 200_000)[1])
    assert report_of("[" * 5000) == (None, "the report is not JSON: JSON nested too deeply")


async def test_gradings_of_one_task_at_once_share_one_reference_run() -> None:
    """The audit grades a task's reference twice and its trivial candidates at once: with values
    taken from the reference, its run is made once, not once per grading."""
    import asyncio

    from dojo.rewards.analysis import grade_analysis
    from dojo.sandbox import ExecutionResult, Limits, Program

    task = next(t for t in load_source("scicode:steps") if t.id == "scicode/29.1")
    task = task.model_copy(update={"id": "scicode/29.1-shared-reference"})

    class Counting:
        def __init__(self, sandbox: AsyncSandbox) -> None:
            self.sandbox, self.runs = sandbox, 0

        async def run(self, program: Program, limits: Limits | None = None) -> ExecutionResult:
            self.runs += 1
            return await self.sandbox.run(program, limits)

    async with AsyncSandbox() as sandbox:
        counting = Counting(sandbox)
        grades = await asyncio.gather(*(grade_analysis(task, task.reference or "", counting) for _ in range(3)))  # type: ignore[arg-type]
    assert [g.passed for g in grades] == [g.total for g in grades]
    assert counting.runs == 4  # one reference run, three candidates
