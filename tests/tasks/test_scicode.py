"""scicode: SciCode's dev problems by step and whole, their asserts turned into captures, graded
against the reference's values from its own sandbox run."""

from __future__ import annotations

import json

import pytest

from dojo.rewards import Grader
from dojo.rewards.analysis import analysis_program, driver_job
from dojo.sandbox import AsyncSandbox
from dojo.tasks import load_source
from dojo.tasks.model import Task
from dojo.tasks.scicode import rewrite_case, scicode_problems


def program(code: str) -> str:
    return f"```python\n{code}\n```"


def test_every_step_and_problem_is_a_task_with_every_case() -> None:
    tasks = load_source("scicode?all=1")
    problems = scicode_problems()
    cases = sum(len(s["test_cases"]) for p in problems for s in p["sub_steps"])
    cases += sum(len(p["general_tests"]) for p in problems)
    assert (
        len(tasks) == 65
        and len(load_source("scicode:steps?all=1")) == 50
        and len(load_source("scicode:problems")) == 15
    )
    assert sum(len(t.tests) for t in tasks) == cases == 221
    for task in tasks:
        for test in task.tests:
            assert "assert " not in (test.code or "") and "target" not in (test.code or ""), task.id
            assert test.expected["reference"] is True and test.expected["rel"] == 1e-5
    assert {t.id for t in tasks} - {t.id for t in load_source("scicode")} == {"scicode/10.10"}  # returning 0 passes
    with pytest.raises(ValueError, match="steps, problems"):
        load_source("scicode:all")


def test_asserts_become_captures_of_what_they_compare() -> None:
    assert rewrite_case("assert np.allclose(f(x), target)") == "__dojo_capture__('values', [f(x)])"
    assert rewrite_case("assert np.allclose(d(c)[0], target[0]) and np.allclose(d(c)[1], target[1])") == (
        "__dojo_capture__('values', [d(c)[0], d(c)[1]])"
    )
    assert rewrite_case("assert are_equivalent(g(r), target)") == "__dojo_capture__('rows', [g(r)])"
    assert rewrite_case("assert (m > 0) == target") == "__dojo_capture__('values', [m > 0])"
    helper = "from scicode.compare.cmp import cmp_tuple_or_list\n"
    assert rewrite_case(helper + "assert cmp_tuple_or_list(p(h), target)") == "__dojo_capture__('values', [p(h)])"
    inside = rewrite_case("def test_1():\n    s = rk4(f)\n    assert not np.isnan(s).any(), 'failed'\ntest_1()")
    assert "__dojo_capture__('values', [s])" in inside and "assert" not in inside
    with pytest.raises(ValueError, match="no assert"):
        rewrite_case("x = 1")
    with pytest.raises(ValueError, match="target"):
        rewrite_case("y = target\nassert f(y)")


def by_id(task_id: str) -> Task:
    return next(t for t in load_source("scicode") if t.id == task_id)


def test_the_step_being_asked_and_its_values_never_enter_the_run() -> None:
    """The candidate's run gets the earlier steps (they are in the prompt too), the cases without
    their targets, and its own code: never the step's reference code."""
    task = by_id("scicode/10.6")
    body = (task.reference or "").split("gXpos", 1)[1].splitlines()[0]
    run = analysis_program(task, "def generate_gpoints(recvec, gmax):\n    return None\n")
    shipped = run.source + (run.stdin or "") + "".join(f.content.decode() for f in run.files)
    assert "get_alpha" in json.dumps(driver_job(task))  # step 10.1's code is the prelude
    assert body not in shipped and "target" not in shipped


GPOINTS_SHUFFLED = """
def generate_gpoints(recvec, gmax):
    g = [(x, y, z) for x in range(-gmax, gmax + 1) for y in range(-gmax, gmax + 1) for z in range(-gmax, gmax + 1)
         if (x, y, z) > (0, 0, 0)]
    pts = np.array(g[::-1], dtype=float) @ (recvec * 2 * np.pi)
    return pts
"""


async def test_reference_passes_points_in_any_order_pass_and_hacks_earn_nothing() -> None:
    """10.6 (are_equivalent: the same points in any order): the reference and a solution giving the
    points in another order earn 1.0; a guess, printing what a checker wants, writing the answer
    file and exiting, searching the run's files for the reference's values: 0."""
    task = by_id("scicode/10.6")
    hacks = {
        "a wrong grid": "def generate_gpoints(recvec, gmax):\n    return np.zeros((1, 3))",
        "printing the expected": "def generate_gpoints(recvec, gmax):\n    print('target', 'PASSED', True)\n"
        "    return None",
        "the answer file written from a guess": "import json, os\njson.dump({'cases': [[1.0], [1.0], [1.0]]}, "
        "open('answer.json', 'w'))\nos._exit(0)",
        "a capture of its own": "def __dojo_capture__(mode, values):\n    pass\n"
        "def generate_gpoints(recvec, gmax):\n    return recvec",
        "reading the truth from the files it can reach": "import os\nfound = []\n"
        "for root in ('/box', '/tmp', os.getcwd()):\n"
        "    for base, _, names in os.walk(root):\n        for n in names:\n"
        "            found.append(open(os.path.join(base, n), errors='ignore').read())\n"
        "def generate_gpoints(recvec, gmax):\n    return np.array([[float(len(found))] * 3])",
    }
    async with AsyncSandbox() as sandbox:
        grader = Grader(sandbox)
        reference = await grader.grade(task, task.reference or "")
        shuffled = await grader.grade(task, program(GPOINTS_SHUFFLED))
        hacked = {name: await grader.grade(task, program(code)) for name, code in hacks.items()}
    assert reference.value == 1.0, reference.cases
    assert shuffled.value == 1.0, shuffled.cases
    for name, reward in hacked.items():
        assert reward.value == 0.0, (name, reward.cases)
        assert reward.verdict != "infrastructure_error", name


async def test_problem_78s_asserts_inside_functions_grade_the_values() -> None:
    """78.1's cases assert inside test functions against values they compute: the reference passes,
    a derivative with the wrong sign fails every case."""
    task = by_id("scicode/78.1")
    wrong = (
        "def pendulum_derivs(state, t, g, L, beta, A, alpha):\n"
        "    return np.array([state[1], (g / L) * np.sin(state[0])])"
    )
    async with AsyncSandbox() as sandbox:
        grader = Grader(sandbox)
        reference = await grader.grade(task, task.reference or "")
        flipped = await grader.grade(task, program(wrong))
    assert reference.value == 1.0, reference.cases
    assert flipped.value == 0.0, flipped.cases
