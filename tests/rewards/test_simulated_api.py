"""tools tasks with a simulated API (BFCL's multi-turn): the calls run on the API in the sandbox,
the state after each turn is compared outside with the gold's; and the ways a policy that has read
this code might try to be paid without doing the task."""

from __future__ import annotations

import json
from typing import Any

import pytest

from dojo.rewards import Grader
from dojo.rewards.outcome import Reward
from dojo.rewards.simulated_api import run_api_calls
from dojo.sandbox import AsyncSandbox
from dojo.tasks import load_source
from dojo.tasks.bfcl import MULTI_TURN_CATEGORIES
from dojo.tasks.gold_calls import gold_turns, keyword_arguments
from dojo.tasks.model import ApiScenario, Task, TestCase

Turns = list[list[dict[str, Any]]]
TOOL = {"type": "function", "function": {"name": "a", "parameters": {"type": "object", "properties": {}}}}


@pytest.fixture(scope="module")
def files_task() -> Task:
    """multi_turn_base_0: a file system and a posting API; 4 turns (mkdir + mv, grep, sort, diff)."""
    [task] = [t for t in load_source("bfcl:multi_turn_base") if t.id == "bfcl:multi_turn_base_0"]
    return task


def gold(task: Task) -> Turns:
    return [[{"name": c["name"], "arguments": keyword_arguments(task, c)} for c in turn] for turn in gold_turns(task)]


def answer(turns: Turns) -> str:
    return json.dumps({"turns": [[turn] for turn in turns]})


async def grade(sandbox: AsyncSandbox, task: Task, turns: Turns) -> Reward:
    return await Grader(sandbox).grade(task, answer(turns))


async def test_the_gold_passes_and_the_state_decides(files_task: Task, fast_sandbox: AsyncSandbox) -> None:
    calls = gold(files_task)
    assert (await grade(fast_sandbox, files_task, calls)).value == 1.0
    # the gold's calls split over several steps of each turn are the same answer
    steps = json.dumps({"turns": [[[c] for c in turn] for turn in calls]})
    assert (await Grader(fast_sandbox).grade(files_task, steps)).value == 1.0
    # the file moved to the wrong place: the first turn's state differs, and nothing after it counts
    wrong = json.loads(json.dumps(calls))
    wrong[0][1]["arguments"]["dir_name"] = "tmp"
    wrong[0][2]["arguments"]["destination"] = "tmp"
    r = await grade(fast_sandbox, files_task, wrong)
    assert r.verdict == "fail" and r.passed == 0 and "GorillaFileSystem's root" in r.cases[0].detail
    # the first turn right, then a turn without a call
    r = await grade(fast_sandbox, files_task, [calls[0], [], *calls[2:]])
    assert r.verdict == "partial" and r.passed == 1 and "no call" in r.cases[1].detail


async def test_a_result_the_request_needs_must_be_produced(files_task: Task, fast_sandbox: AsyncSandbox) -> None:
    """grep changes no state: only its result shows the turn was done."""
    calls = gold(files_task)
    no_grep = [calls[0], [c for c in calls[1] if c["name"] != "grep"], *calls[2:]]
    r = await grade(fast_sandbox, files_task, no_grep)
    assert r.passed == 1 and "never produced" in r.cases[1].detail
    # the grep done a turn early counts (results so far), as BFCL counts it
    early = [calls[0] + calls[1], [calls[1][1]], *calls[2:]]
    assert (await grade(fast_sandbox, files_task, early)).passed >= 2


async def test_side_effects_on_another_api_fail(files_task: Task, fast_sandbox: AsyncSandbox) -> None:
    calls = gold(files_task)
    config = files_task.api.config["TwitterAPI"] if files_task.api else {}
    login = {
        "name": "authenticate_twitter",
        "arguments": {"username": config["username"], "password": config["password"]},
    }
    extra = [login, {"name": "post_tweet", "arguments": {"content": "done!"}}]
    r = await grade(fast_sandbox, files_task, [calls[0] + extra, *calls[1:]])
    assert r.verdict == "fail" and "TwitterAPI" in r.cases[0].detail


async def test_the_apis_internals_cannot_be_called(files_task: Task, fast_sandbox: AsyncSandbox) -> None:
    """A call can name only a public method offered at its turn: never _load_scenario (which would
    load the end state directly), a dunder, an attribute, or a tool not offered."""
    calls = gold(files_task)
    config = files_task.api.config if files_task.api else {}
    internals = [
        {"name": "_load_scenario", "arguments": {"scenario": config["GorillaFileSystem"]}},
        {"name": "__init__", "arguments": {}},
        {"name": "root", "arguments": {}},
        {"name": "__class__", "arguments": {}},
        {"name": "eval", "arguments": {"source": "1"}},
    ]
    run = await run_api_calls(files_task, [internals], fast_sandbox, observe_from=0)
    assert run.problem is None and all("there is no function" in o for o in run.observations())
    r = await grade(fast_sandbox, files_task, [internals + calls[0], *calls[1:]])
    assert r.value == 1.0  # refused calls change nothing (and the rest is the gold)
    r = await grade(fast_sandbox, files_task, [internals, *calls[1:]])
    assert r.verdict == "fail"


async def test_arguments_are_data_never_code(files_task: Task, fast_sandbox: AsyncSandbox) -> None:
    calls = gold(files_task)
    code = "__import__('os').system('id')"
    sneaky = json.loads(json.dumps(calls))
    sneaky[0][1]["arguments"]["dir_name"] = code
    run = await run_api_calls(files_task, [[sneaky[0][0], sneaky[0][1], {"name": "ls", "arguments": {}}]],
                              fast_sandbox, observe_from=0)  # fmt: skip
    assert code in run.observations()[-1]  # a directory of that name, nothing run
    bad_args = [{"name": "mkdir", "arguments": ["temp"]}, {"name": "mkdir", "arguments": {"nope": 1}}]
    run = await run_api_calls(files_task, [bad_args], fast_sandbox, observe_from=0)
    assert all(o.startswith("Error during execution") for o in run.observations())


async def test_printing_what_the_checker_wants_is_not_doing_it(files_task: Task, fast_sandbox: AsyncSandbox) -> None:
    reference_run = await run_api_calls(files_task, gold_turns(files_task), fast_sandbox, restrict=False,
                                        observe_from=0)  # fmt: skip
    claims = [
        "\n".join(reference_run.observations()),
        json.dumps({"valid": True, "turns": reference_run.turns}),
        json.dumps({"turns": "all done"}),
    ]
    for text in claims:
        r = await Grader(fast_sandbox).grade(files_task, text)
        assert r.value == 0.0, (text[:80], r)


async def test_a_held_back_tool_is_refused_until_its_turn(fast_sandbox: AsyncSandbox) -> None:
    tasks = load_source("bfcl:multi_turn_miss_func?n=20&seed=1")
    task = next(t for t in tasks if t.api and any(t.api.added.values()))
    assert task.api is not None
    [(turn, names)] = task.api.added.items()
    offered_before = {t["function"]["name"] for t in task.api.offered(task.tools, turn - 1)}
    offered_then = {t["function"]["name"] for t in task.api.offered(task.tools, turn)}
    assert not set(names) & offered_before and set(names) <= offered_then
    calls = gold(task)
    early = [[] for _ in calls]
    early[0] = calls[turn] + calls[0]  # the held-back tool's calls made at the first turn
    run = await run_api_calls(task, [early[0]], fast_sandbox, observe_from=0)
    refused = [o for o in run.observations() if "there is no function" in o]
    assert len(refused) >= sum(c["name"] in names for c in calls[turn])


@pytest.mark.parametrize("category", MULTI_TURN_CATEGORIES)
async def test_multi_turn_references_pass_and_doing_nothing_fails(category: str, fast_sandbox: AsyncSandbox) -> None:
    tasks = load_source(f"bfcl:{category}?n=12&seed=3")
    grader = Grader(fast_sandbox)
    for task in tasks:
        assert (await grader.grade(task, task.reference or "")).value == 1.0, task.id
        nothing = await grader.grade(task, "I will do it.")
        assert nothing.value == 0.0 and nothing.verdict == "no_answer"


def test_an_api_task_says_what_is_wrong() -> None:
    api = ApiScenario(classes=["Files"], modules={"Files": "pkg.files"}, turns=["hi", "more"])
    with pytest.raises(ValueError, match="one list per turn"):
        Task(id="t", form="tools", prompt="x", tools=[TOOL], api=api, tests=[TestCase(expected={"turns": [["a()"]]})])
    with pytest.raises(ValueError, match="needs a module"):
        ApiScenario(classes=["Files"], modules={}, turns=["hi"])
    with pytest.raises(ValueError, match="added at turn 3"):
        ApiScenario(classes=["Files"], modules={"Files": "m"}, turns=["hi"], added={3: ["x"]})
    with pytest.raises(ValueError, match="only a tools task"):
        Task(id="t", form="answer", prompt="x", api=api, tests=[TestCase(expected="1")])
    with pytest.raises(ValueError, match="multi_turn_base"):
        load_source("bfcl:multi_turn_nope")
