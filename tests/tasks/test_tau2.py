"""tau2:<domain>: tau2-bench's customer-service tasks with a scripted user, checked on the database
the conversation leaves (tau2's tools run only in the sandbox) and on what the agent told the user;
and the ways a policy might try to be paid without serving the customer."""

from __future__ import annotations

import json
from typing import Any

import pytest

from dojo.agent.episode import EpisodeConfig, EpisodeRunner
from dojo.agent.policy import Completion, ToolCall
from dojo.rewards import Grader, GradingConfig
from dojo.rewards.simulated_api import run_api_calls
from dojo.sandbox import AsyncSandbox
from dojo.tasks import load_source
from dojo.tasks.gold_calls import gold_turns, keyword_arguments
from dojo.tasks.model import Task
from dojo.tasks.tau2 import CONFIRM, DOMAINS, GOODBYE
from tests.agent.scripted import Reply, ScriptedPolicy


@pytest.fixture(scope="module")
def airline() -> dict[str, Task]:
    return {t.id: t for t in load_source("tau2:airline")}


def calls(task: Task) -> list[dict[str, Any]]:
    return [{"name": c["name"], "arguments": keyword_arguments(task, c)} for c in gold_turns(task)[0]]


def answer(made: list[dict[str, Any]], said: list[str]) -> str:
    return json.dumps({"turns": [[made]], "said": said})


@pytest.mark.parametrize("domain", DOMAINS)
async def test_references_pass_and_changes_left_undone_fail(domain: str, fast_sandbox: AsyncSandbox) -> None:
    grader = Grader(fast_sandbox)
    for task in load_source(f"tau2:{domain}?n=8&seed=5"):
        assert (await grader.grade(task, task.reference or "")).value == 1.0, task.id
        nothing = await grader.grade(task, "Sorry, I cannot help with that.")
        assert nothing.value == 0.0, (task.id, nothing.cases)  # (the tasks doing nothing passes are left out)


async def test_the_wrong_change_fails_and_the_right_one_must_be_told(
    airline: dict[str, Task], fast_sandbox: AsyncSandbox
) -> None:
    grader = Grader(fast_sandbox)
    cancel = airline["tau2:airline/9"]
    made = calls(cancel)
    assert (await grader.grade(cancel, answer(made, ["Done."]))).value == 1.0
    wrong = [dict(c, arguments={"reservation_id": "ZFA04Y"}) if c["name"] == "cancel_reservation" else c for c in made]
    r = await grader.grade(cancel, answer(wrong, ["Done."]))
    assert r.verdict == "fail" and "db" in r.cases[0].detail
    tell = airline["tau2:airline/3"]  # the agent must tell the user a number ("4")
    r = await grader.grade(tell, answer(calls(tell), ["I looked it up."]))
    assert r.verdict == "partial" and r.cases[0].passed and not r.cases[1].passed
    assert r.value == 0.0  # tau2 multiplies its reward's parts; partial credit only when asked for
    by_fraction = await Grader(fast_sandbox, GradingConfig(mode="fraction")).grade(tell, answer(calls(tell), ["Hi."]))
    assert by_fraction.value == 0.5
    assert (await grader.grade(tell, answer(calls(tell), ["You have 4 of them."]))).value == 1.0


async def test_a_reply_of_every_number_tells_the_user_nothing(
    airline: dict[str, Task], fast_sandbox: AsyncSandbox
) -> None:
    """tau2's rule is a substring of a reply: every 3-digit string in 1,002 digits (or 0 to 99
    written out) named each number a task needs without looking anything up, and was paid 1.0
    (found by an adversary, 2026-12-07). A number counts as itself only, in a reply that names at
    most ``MAX_REPLY_NUMBERS`` numbers; a real answer still counts, with a price or a number in it."""
    from dojo.rewards.simulated_api import MAX_REPLY_NUMBERS, said_outcomes

    grader = Grader(fast_sandbox)
    tell = airline["tau2:airline/3"]  # the agent must tell the user a number ("4")
    digits = "".join(f"{i:03d}" for i in range(1000))  # every 3-digit string, and so every digit
    counted = " ".join(str(i) for i in range(100))
    for stuffed in (f"Done. Reference: {digits}.", f"Done. Codes: {counted}."):
        r = await grader.grade(tell, answer(calls(tell), [stuffed]))
        assert r.value == 0.0 and not r.cases[1].passed, r.cases
    assert (await grader.grade(tell, answer(calls(tell), ["You have 4 of them, at $1,200.50 in all."]))).value == 1.0
    assert [o.passed for o in said_outcomes(["1000", "4", "44"], ["Refund: $1,000. Bags: 4 (44 kg)."], 0)] == [1, 1, 1]
    assert [o.passed for o in said_outcomes(["4", "10"], ["Order 1234 of 10.5 kg, $3.4."], 0)] == [0, 0]
    cents = ["Refund $327.00; the new booking costs $1,000.00; total $481.50."]  # (a review: these failed)
    assert [o.passed for o in said_outcomes(["327", "1000", "481.5", "1,000"], cents, 0)] == [1, 1, 1, 1]
    listing = " ".join(str(n) for n in range(MAX_REPLY_NUMBERS)) + " 4"
    assert [o.passed for o in said_outcomes(["4"], [listing], 0)] == [1]  # at the limit: an answer still
    assert [o.passed for o in said_outcomes(["4"], [listing + " 999"], 0)] == [0]


async def test_only_the_agents_own_words_are_what_it_said(airline: dict[str, Task], fast_sandbox: AsyncSandbox) -> None:
    """tau2 counts only the assistant's words as said: an answer with no ``said`` told the user
    nothing, though a call's argument holds the text; in a plain reply, the words around the calls
    count and the calls do not."""
    grader = Grader(fast_sandbox)
    tell = airline["tau2:airline/3"]  # the agent must tell the user a number ("4")
    made = calls(tell)
    smuggled = [*made, {"name": "calculate", "arguments": {"expression": "4"}}]
    r = await grader.grade(tell, json.dumps({"turns": [[smuggled]]}))
    assert r.cases[0].passed and not r.cases[1].passed, r.cases
    tagged = "".join(f"<tool_call>{json.dumps(c)}</tool_call>" for c in made)
    r = await grader.grade(
        tell, tagged + '<tool_call>{"name": "calculate", "arguments": {"expression": "4"}}</tool_call>'
    )
    assert r.cases[0].passed and not r.cases[1].passed, r.cases
    assert (await grader.grade(tell, tagged + "You have 4 of them.")).value == 1.0


async def test_internals_and_claims_are_not_a_changed_database(
    airline: dict[str, Task], fast_sandbox: AsyncSandbox
) -> None:
    """The adapter's state, its toolkit and its scenario loader cannot be called; printing a hash or
    "cancelled" changes no database."""
    cancel = airline["tau2:airline/9"]
    internals = [{"name": n, "arguments": {}} for n in ("_state", "_tools", "_load_scenario", "__init__", "use_tool")]
    run = await run_api_calls(cancel, [internals], fast_sandbox, observe_from=0)
    assert all("there is no function" in o for o in run.observations()), run.observations()
    grader = Grader(fast_sandbox)
    gold = await run_api_calls(cancel, gold_turns(cancel), fast_sandbox, restrict=False)
    claim = f"Your reservation NQNU5R is cancelled. db hash: {gold.turns[-1]['state']}"
    assert (await grader.grade(cancel, claim)).value == 0.0
    assert (await grader.grade(cancel, answer(internals, [claim]))).value == 0.0


async def test_an_episode_with_the_scripted_user(airline: dict[str, Task], fast_sandbox: AsyncSandbox) -> None:
    """The user's brief, then a confirmation, then goodbye; the agent's calls run on tau2's tools
    and what it said is checked."""
    task = airline["tau2:airline/3"]
    gold = calls(task)

    def script(messages: list[dict[str, Any]], _i: int) -> Reply:
        turn = sum(m["role"] == "user" for m in messages) - 1
        made = sum(m["role"] == "tool" for m in messages)
        if turn == 0 and made < len(gold):
            name, arguments = gold[made]["name"], gold[made]["arguments"]
            return Completion(text="", tool_calls=[ToolCall(id=f"c{made}", name=name, arguments=arguments)])
        return "You have 4 of them." if turn == 0 else "Glad to help."

    policy = ScriptedPolicy(script)
    config = EpisodeConfig(mode="tools", max_turns=16, max_total_tokens=10_000)
    ep = await EpisodeRunner(policy, Grader(fast_sandbox), config).run(task)
    assert ep.status == "answered" and ep.value == 1.0, ep.reward
    users = [m["content"] for m in ep.messages if m["role"] == "user"]
    assert users[1:] == [CONFIRM, GOODBYE] and "anya_garcia_5901" in users[0]
    tool_messages = [m["content"] for m in ep.messages if m["role"] == "tool"]
    assert "JMO1MG" in tool_messages[0]  # tau2's reservation, as its tool returned it
    assert set(policy.offered[0]) == {t["function"]["name"] for t in task.tools}


def test_tau2_sources_say_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="airline, retail, telecom"):
        load_source("tau2:mock")
    with pytest.raises(ValueError, match="n must be"):
        load_source("tau2:airline?n=x")


async def test_a_served_user_plays_the_customer(airline: dict[str, Task], fast_sandbox: AsyncSandbox) -> None:
    """With a user model, the customer opens (answering the agent's greeting), sees the conversation
    from its side (its brief as system prompt, the agent's words as the other party's, no tool
    traffic), and ends it with ###STOP###."""
    task = airline["tau2:airline/3"]
    assert task.api is not None and task.api.user is not None and "anya_garcia_5901" in task.api.user
    gold = calls(task)

    def agent(messages: list[dict[str, Any]], _i: int) -> Reply:
        made = sum(m["role"] == "tool" for m in messages)
        if made < len(gold):
            name, arguments = gold[made]["name"], gold[made]["arguments"]
            return Completion(text="", tool_calls=[ToolCall(id=f"c{made}", name=name, arguments=arguments)])
        return "You have 4 of them."

    seen: list[list[dict[str, Any]]] = []

    def customer(messages: list[dict[str, Any]], i: int) -> Reply:
        seen.append(messages)
        return "Hi, I am Anya Garcia (anya_garcia_5901). How many do I have?" if i == 0 else "Thanks! ###STOP###"

    config = EpisodeConfig(mode="tools", max_turns=16, max_total_tokens=10_000)
    runner = EpisodeRunner(ScriptedPolicy(agent), Grader(fast_sandbox), config, user=ScriptedPolicy(customer))
    ep = await runner.run(task)
    assert ep.status == "answered" and ep.value == 1.0, ep.reward
    assert ep.messages[1] == {"role": "assistant", "content": "Hi! How can I help you today?"}
    assert ep.messages[2]["content"].startswith("Hi, I am Anya Garcia")
    assert len(seen) == 2 and seen[0][0] == {"role": "system", "content": task.api.user}
    assert seen[1][-1] == {"role": "user", "content": "You have 4 of them."}  # the agent, as the other party
    assert all(m["role"] != "tool" for m in seen[1])


async def test_an_episode_ends_where_tau2_cuts_a_conversation_short(
    airline: dict[str, Task], fast_sandbox: AsyncSandbox
) -> None:
    """A policy guessing ids by brute force: tau2 ends the conversation at its 10th failed call with
    reward 0, so the episode ends there too (not at max_turns), and the same calls graded later
    score 0, though the right change is made after them."""
    task = airline["tau2:airline/9"]
    gold = calls(task)
    guesses = iter(range(100))

    def script(messages: list[dict[str, Any]], _i: int) -> Reply:
        guess = {"reservation_id": f"ZZ{next(guesses):04d}"}
        return Completion(text="", tool_calls=[ToolCall(id="g", name="get_reservation_details", arguments=guess)])

    config = EpisodeConfig(mode="tools", max_turns=40, max_total_tokens=100_000)
    ep = await EpisodeRunner(ScriptedPolicy(script), Grader(fast_sandbox), config).run(task)
    assert len(ep.turns) == 10 and ep.value == 0.0, (len(ep.turns), ep.reward)
    assert "tau2 ends a conversation at 10" in ep.reward.cases[0].detail  # type: ignore[union-attr]
    grader = Grader(fast_sandbox)
    failing = [{"name": "get_reservation_details", "arguments": {"reservation_id": f"ZZ{i:04d}"}} for i in range(9)]
    assert (await grader.grade(task, answer(failing + gold, ["Done."]))).value == 1.0
    assert (await grader.grade(task, answer([*failing, failing[0], *gold], ["Done."]))).value == 0.0


async def test_telecom_solo_tasks_are_checked_by_their_assertions(fast_sandbox: AsyncSandbox) -> None:
    """telecom in tau2's solo mode: the agent fixes the phone itself; the task's assertion functions
    run in the sandbox on the final state and their expected values stay outside; the assertion
    functions themselves cannot be called."""
    grader = Grader(fast_sandbox)
    tasks = load_source("tau2:telecom?n=6&seed=2")
    for task in tasks:
        assert (await grader.grade(task, task.reference or "")).value == 1.0, task.id
        assert (await grader.grade(task, "Done, it works now.")).value == 0.0, task.id
    task = tasks[0]
    expected = task.tests[0].expected
    assert expected["asserts"] and "assert_value" not in json.dumps(task.api.config if task.api else {})
    wrong = [{"name": "toggle_airplane_mode", "arguments": {}}]
    r = await grader.grade(task, answer(wrong, ["Done."]))
    assert r.value is not None and r.value < 1.0 and "fails check" in r.cases[0].detail + r.cases[-1].detail
    peek = [{"name": "assert_mobile_data_status", "arguments": {"expected_status": True}}]
    run = await run_api_calls(task, [peek], fast_sandbox, observe_from=0)
    assert "there is no function" in run.observations()[0]


def test_a_required_action_matches_a_call_exactly_when_tau2_says_so() -> None:
    """dojo's action check (``action_matches``) against tau2's own (``Action.compare_with_tool_call``)
    on calls made from every required action of the 32 telecom ACTION tasks: the gold call, no
    arguments, each argument changed, left out or joined by another, and another tool's name."""
    from tau2.data_model.message import ToolCall as Tau2Call
    from tau2.data_model.tasks import Action

    from dojo.rewards.simulated_api import action_matches

    actions = [a for t in load_source("tau2:telecom") for a in t.tests[0].expected["actions"]]
    assert len(actions) >= 32 and any(a["compare_args"] == [] for a in actions)
    checked = 0
    for a in actions:
        gold = dict(a["arguments"])
        made = [gold, {}, {**gold, "extra": 1}]
        made += [{**gold, k: "changed"} for k in gold] + [{j: v for j, v in gold.items() if j != k} for k in gold]
        theirs = Action(action_id="a", name=a["name"], arguments=gold, compare_args=a["compare_args"])
        for name in (a["name"], "another_tool"):
            for arguments in made:
                call = {"name": name, "arguments": arguments}
                tau2 = theirs.compare_with_tool_call(Tau2Call(id="c", name=name, arguments=arguments))
                assert action_matches(a, call) is tau2, (a, call)
                checked += 1
    assert checked >= 200


async def test_telecom_required_actions_count() -> None:
    """Where tau2's reward includes ACTION, the actions it names must be among the agent's calls."""
    tasks = [t for t in load_source("tau2:telecom") if t.tests[0].expected["actions"]]
    assert len(tasks) == 32
    from dojo.rewards.simulated_api import ApiRun, assertion_outcomes

    task = tasks[0]
    expected = task.tests[0].expected
    state = {"TelecomAPI": {}}  # no assertion passes here: only the actions are looked at
    outcomes = assertion_outcomes(
        expected["asserts"], expected["actions"], [[]], ApiRun(turns=[{"results": [], "state": state}])
    )
    assert not any(o.passed for o in outcomes[len(expected["asserts"]) :])
    made = [[{"name": a["name"], "arguments": dict(a["arguments"])} for a in expected["actions"]]]
    outcomes = assertion_outcomes(
        expected["asserts"], expected["actions"], made, ApiRun(turns=[{"results": [], "state": state}])
    )
    assert all(o.passed for o in outcomes[len(expected["asserts"]) :])
