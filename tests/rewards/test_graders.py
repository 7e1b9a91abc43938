"""Graders by form, on real HumanEval tasks and small hand-made ones."""

from __future__ import annotations

from typing import Any

import pytest

from dojo.rewards import FormatBonus, Grader, GradingConfig, LengthPenalty, RewardStats
from dojo.sandbox import AsyncSandbox, ExecutionResult, Limits
from dojo.tasks import Task, TestCase, load_humaneval, load_reasoning_gym
from dojo.tasks.values import encode_value


@pytest.fixture(scope="module")
def humaneval() -> dict[str, Task]:
    return {t.id: t for t in load_humaneval("assert") + load_humaneval("function")}


def square_task(**extra: Any) -> Task:
    tests = [TestCase(args=[x], expected=x * x) for x in (2, 3, 4, 5)]
    return Task(id="square", form="function", prompt="Write square(x).", entry_point="square", tests=tests, **extra)


async def test_every_humaneval_reference_scores_one(grader: Grader, humaneval: dict[str, Task]) -> None:
    tasks = list(humaneval.values())
    assert len([t for t in tasks if t.form == "assert"]) == 164
    rewards = await grader.grade_many([(t, t.reference or "") for t in tasks])
    failed = [(t.id, r.verdict, r.error) for t, r in zip(tasks, rewards, strict=True) if r.value != 1.0]
    assert failed == []


async def test_a_completion_that_only_raises_scores_zero_everywhere(grader: Grader, humaneval: dict[str, Task]) -> None:
    tasks = list(humaneval.values())
    rewards = await grader.grade_many([(t, "    raise NotImplementedError\n") for t in tasks])
    assert [t.id for t, r in zip(tasks, rewards, strict=True) if r.value != 0.0] == []  # `assert True` earns nothing


async def test_humaneval_completion_convention_and_partial_credit(grader: Grader, humaneval: dict[str, Task]) -> None:
    task = humaneval["HumanEval/2"]  # truncate_number: return number % 1.0
    assert (await grader.grade(task, "    return number % 1.0\n")).value == 1.0
    wrong = await grader.grade(task, "    return 0.33\n")  # right for 1.33 only (a hidden case)
    assert wrong.verdict == "partial" and wrong.value == 0.5 and 0 < wrong.passed < wrong.total
    shown = await grader.grade(task, "    return 0.5\n")  # right for 3.5 only: the prompt's own example
    assert shown.verdict == "fail" and shown.value == 0.0
    none = await grader.grade(task, "    return -1.0\n")
    assert none.verdict == "fail" and none.value == 0.0


async def test_function_form_verdicts(grader: Grader) -> None:
    task = square_task()
    assert (await grader.grade(task, "def square(x):\n    return x * x")).value == 1.0
    half = await grader.grade(task, "def square(x):\n    return x * x if x < 4 else 0")
    assert (half.verdict, half.passed, half.value) == ("partial", 2, 0.5)
    raised = await grader.grade(task, "def square(x):\n    raise ValueError('nope')")
    assert raised.value == 0.0 and "ValueError: nope" in raised.cases[0].detail
    syntax = await grader.grade(task, "def square(x) return x")
    assert syntax.verdict == "compile_error" and syntax.value == 0.0
    missing = await grader.grade(task, "def cube(x):\n    return x ** 3")
    assert missing.value == 0.0 and "no function named square" in missing.feedback()
    empty = await grader.grade(task, "")
    assert empty.verdict == "no_answer" and empty.value == 0.0


async def test_a_slow_case_keeps_the_results_before_it(fast_sandbox: AsyncSandbox) -> None:
    grader = Grader(fast_sandbox, GradingConfig(limits=Limits(wall_time=2, cpu_time=1), mode="fraction"))
    task = square_task()
    code = "def square(x):\n    while x == 5:\n        pass\n    return x * x"
    r = await grader.grade(task, code, seed=0)
    assert 0 < r.passed < 4 or r.passed == 0  # order is shuffled; case x=5 never answers
    assert any("limit" in c.detail for c in r.cases if not c.passed), [(c.passed, c.detail) for c in r.cases]
    assert r.value == r.passed / 4


async def test_a_case_ended_by_the_runs_wall_clock_limit_says_so(fast_sandbox: AsyncSandbox) -> None:
    """A case that sleeps uses no CPU: the run's wall-clock limit ends it, and the candidate's process
    ends by signal 9, which alone says nothing of why (a loaded machine ends the case above so too)."""
    grader = Grader(fast_sandbox, GradingConfig(limits=Limits(wall_time=2, cpu_time=1), mode="fraction"))
    code = "import time\ndef square(x):\n    if x == 5:\n        time.sleep(60)\n    return x * x"
    r = await grader.grade(square_task(), code, seed=0)
    failed = [c.detail for c in r.cases if not c.passed]
    assert failed and all("limit" in d for d in failed), failed


async def test_floats_within_tolerance_and_exact_types(grader: Grader) -> None:
    tests = [TestCase(args=[1], expected=encode_value((0.1 + 0.2, [1, 2])))]
    task = Task(id="t", form="function", prompt="", entry_point="f", tests=tests, float_tolerance=1e-9)
    assert (await grader.grade(task, "def f(x):\n    return (0.3, [1, 2])")).value == 1.0
    assert (await grader.grade(task, "def f(x):\n    return [0.3, [1, 2]]")).value == 0.0  # list is not tuple
    assert (await grader.grade(task, "def f(x):\n    return (0.3000001, [1, 2])")).value == 0.0


async def test_expected_values_never_enter_the_sandbox(fast_sandbox: AsyncSandbox) -> None:
    tests = [TestCase(args=[], expected="SECRET-EXPECTED-4711", visible=True)]
    task = Task(id="leak", form="function", prompt="", entry_point="f", tests=tests)
    snoop = (
        "import os, sys\n"
        "def f():\n"
        "    blob = sys.stdin.read() + str(os.environ)\n"
        "    for root, _, files in os.walk('/box'):\n"
        "        for name in files:\n"
        "            blob += open(os.path.join(root, name), errors='ignore').read()\n"
        "    return 'found' if 'SECRET-' + 'EXPECTED' in blob else 'absent'\n"
    )
    r = await Grader(fast_sandbox, GradingConfig(scan=False)).grade(task, snoop)
    assert r.value == 0.0 and r.cases[0].detail == "returned absent"


class FailingSandbox:
    """Stands in for a sandbox whose slot died during every run."""

    async def run(self, program: Any, limits: Any = None, **kw: Any) -> ExecutionResult:
        return ExecutionResult.from_sandbox_error("slot slot-0 died during the run", "python")

    async def run_many(self, programs: Any, limits: Any = None) -> list[ExecutionResult]:
        return [await self.run(p) for p in programs]


@pytest.mark.parametrize("form", ["function", "assert", "stdio"])
async def test_infrastructure_failure_is_no_reward_not_zero(form: str, humaneval: dict[str, Task]) -> None:
    stats = RewardStats()
    grader = Grader(FailingSandbox(), stats=stats)  # type: ignore[arg-type]
    if form == "stdio":
        task = Task(id="s", form="stdio", prompt="", tests=[TestCase(stdin="1", expected="1")])
    else:
        task = humaneval["HumanEval/0" if form == "assert" else "HumanEval/0/function"]
    r = await grader.grade(task, task.reference or "print(1)")
    assert r.value is None and r.verdict == "infrastructure_error" and "died" in (r.error or "")
    assert stats.as_dict()["infrastructure_errors"] == 1 and stats.mean is None


async def test_stdio_tokens_floats_and_compile_errors(grader: Grader) -> None:
    tests = [TestCase(stdin="3 4\n", expected="7 0.75"), TestCase(stdin="1 2\n", expected="3  0.5\n")]
    task = Task(id="sum", form="stdio", prompt="", tests=tests)
    ok = "a, b = map(int, input().split())\nprint(a + b, a / b + 1e-9)"
    assert (await grader.grade(task, f"```python\n{ok}\n```")).value == 1.0
    assert (await grader.grade(task, "print(7, 0.75)")).verdict == "partial"
    c_task = task.model_copy(update={"language": "c"})
    c_ok = '#include <stdio.h>\nint main(){int a,b;scanf("%d %d",&a,&b);printf("%d %.6f\\n",a+b,(double)a/b);}'
    assert (await grader.grade(c_task, c_ok)).value == 1.0
    broken = await grader.grade(c_task, "int main( {")
    assert broken.verdict == "compile_error" and broken.value == 0.0 and "error" in (broken.error or "")


async def test_stdio_checker_judges_outside_the_program(grader: Grader) -> None:
    checker = (
        "n = int(open('input.txt').read())\n"
        "a, b = map(int, open('output.txt').read().split())\n"
        "raise SystemExit(0 if a * b == n and a > 1 and b > 1 else 1)\n"
    )
    task = Task(
        id="factor", form="stdio", prompt="", tests=[TestCase(stdin="15"), TestCase(stdin="21")], checker=checker
    )
    assert (
        await grader.grade(task, "n=int(input())\nd=next(d for d in range(2,n) if n%d==0)\nprint(d, n//d)")
    ).value == 1.0
    assert (await grader.grade(task, "print(1, int(input()))")).value == 0.0


async def test_answer_form_exact_numeric_and_source_scorer(grader: Grader) -> None:
    exact = Task(id="a", form="answer", prompt="Capital of France?", tests=[TestCase(expected="Paris")])
    assert (await grader.grade(exact, "It is <answer>Paris</answer>")).value == 1.0
    assert (await grader.grade(exact, "<answer>Paris</answer> <answer>Lyon</answer>")).value == 0.0
    numeric = Task(id="n", form="answer", prompt="", tests=[TestCase(expected="0.5")], answer_match="numeric")
    assert (await grader.grade(numeric, "The answer is 1/2")).value == 1.0
    [rg] = load_reasoning_gym(["chain_sum"], n=1, level=1, seed=3)
    assert (await grader.grade(rg, rg.reference or "")).value == 1.0
    assert (await grader.grade(rg, "<answer>not a number</answer>")).value == 0.0


@pytest.mark.parametrize(("mode", "expected"), [("default", 0.5), ("fraction", 0.5), ("binary", 0.0)])
async def test_reward_modes(fast_sandbox: AsyncSandbox, mode: str, expected: float) -> None:
    r = await Grader(fast_sandbox, GradingConfig(mode=mode)).grade(
        square_task(), "def square(x):\n    return 4 if x == 2 else 9"
    )  # type: ignore[arg-type]
    assert r.passed == 2 and r.value == expected


async def test_user_reward_function_and_shaping(fast_sandbox: AsyncSandbox) -> None:
    grader = Grader(
        fast_sandbox,
        GradingConfig(mode=lambda p, t: p / t * 10, shaping=[FormatBonus(bonus=0.1), LengthPenalty(10, 20, 1.0)]),
    )
    r = await grader.grade(square_task(), "```python\ndef square(x):\n    return x * x\n```")
    assert r.components["correctness"] == 10.0 and r.components["format"] == 0.1 and r.components["length"] == -1.0
    assert r.value == pytest.approx(9.1)
    # no answer (an empty block) or code that does not compile: shaping may cost, never pay (0.1 had been paid)
    for nothing in ("```python\n```", "```python\ndef square(x) return\n```"):
        r = await grader.grade(square_task(), nothing)
        assert r.verdict in ("no_answer", "compile_error") and r.components["format"] == 0.0 and r.value <= 0.0, r
    r = await grader.grade(square_task(), "```python\n```" + " " * 30)
    assert r.verdict == "no_answer" and r.components["length"] == -1.0


def test_bad_grader_settings_are_refused(fast_sandbox: AsyncSandbox) -> None:
    with pytest.raises(ValueError, match="unknown reward mode"):
        Grader(fast_sandbox, GradingConfig(mode="halves"))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="soft_limit"):
        LengthPenalty(100, 10)


async def test_an_int_past_the_decimal_text_limit_is_an_honest_answer(grader: Grader) -> None:
    big = 2**20000  # 6,021 digits: more than Python converts to or from decimal text
    function = Task(id="big", form="function", prompt="", entry_point="f",
                    tests=[TestCase(args=[20000], expected=encode_value(big))])  # fmt: skip
    check = "def check(candidate):\n    assert candidate(20000) == 2 ** 20000\n"
    asserted = Task(id="big-a", form="assert", prompt="", entry_point="f", tests=[TestCase(code=check)])
    for task in (function, asserted):
        assert (await grader.grade(task, "def f(n):\n    return 2 ** n\n")).value == 1.0
        assert (await grader.grade(task, "def f(n):\n    return 2 ** n + 1\n")).value == 0.0


@pytest.mark.parametrize("answers", [["true", "false"] * 3 + ["true"], ["1", "1", "1", "2"], ["a", "b"]])
def test_call_orders_always_expose_a_counter_replaying_answers(answers: list[str]) -> None:
    """A counter that answers call k with case k's answer (in each pass) gives some case two
    different answers, whatever the seed, even when the answers are mostly equal."""
    import random

    from dojo.rewards.graders import call_orders

    for seed in range(300):
        first, second = call_orders(answers, random.Random(seed))
        assert sorted(first) == sorted(second) == list(range(len(answers)))
        got: dict[int, set[str]] = {}
        for order in (first, second):
            for position, case in enumerate(order):
                got.setdefault(case, set()).add(answers[position])
        assert any(len(v) > 1 for v in got.values()), (seed, first, second)


def test_call_orders_with_one_answer_for_all_cases_are_still_two_orders() -> None:
    import random

    from dojo.rewards.graders import call_orders

    first, second = call_orders(["0"] * 5, random.Random(1))
    assert sorted(first) == sorted(second) == list(range(5)) and first != second


async def test_a_lone_surrogate_in_a_completion_is_graded_not_raised(fast_sandbox: AsyncSandbox) -> None:
    """No UTF-8 holds one: it raised UnicodeEncodeError out of the grade where the text was measured in
    bytes (a report, a document) or written to a run (a program's source)."""
    from dojo.tasks import load_source
    from tests.agent.scripted import double_task

    grader = Grader(fast_sandbox)
    tasks = [*load_source("family:doc_analysis?n=1"), *load_source("family:documents?n=1"), double_task()]
    for task in tasks:
        reward = await grader.grade(task, "```python\ndef f(x):\n    return '\ud800'\n```\n<answer>\udc80</answer>")
        assert reward.value == 0.0, (task.id, reward)
