"""The limits that end an episode by the policy's own doing: each ends it graded, never unscored.

An unscored episode (``None``) is retried and never trained on, so a policy heading for a 0 gains
by ending its episode as a failure of the machinery: slow runs until the deadline, a flood of tool
calls, a conversation past the model's context. Each of those now ends the episode on its last
candidate, graded.
"""

from __future__ import annotations

import asyncio
import itertools
import time

import pytest
from pydantic import ValidationError

from dojo.agent.episode import EpisodeConfig, EpisodeRunner
from dojo.agent.policy import Completion, ContextFull, RequestRefused, SamplingParams, ToolCall
from dojo.agent.sandbox_clock import SlotClock
from dojo.agent.tools import Toolbox
from dojo.rewards import Grader
from tests.agent.scripted import WRONG, ScriptedPolicy, double_task, fixed, tool

FULL = "This model's maximum context length is 1024 tokens. However, your request has 1500 input tokens."


async def test_runs_that_would_reach_the_deadline_end_at_the_tool_time_budget_graded(grader: Grader) -> None:
    # each reply runs code that sleeps: 64 turns of it would pass the deadline (no reward, retried)
    sleeper = tool("run_code", code="import time\ntime.sleep(0.3)")
    cfg = EpisodeConfig(mode="tools", max_turns=64, time_limit=30.0, tool_time_limit=1.0)
    ep = await EpisodeRunner(fixed(sleeper), grader, cfg).run(double_task())
    assert ep.status == "tool_time_limit" and ep.scored and ep.value == 0.0
    assert 1 <= len(ep.turns) <= 4 and ep.tool_seconds >= 1.0  # each run holds its slot >= 0.3 s
    assert "budget" in (ep.error or "")


async def test_visible_checks_count_against_the_tool_time_budget(grader: Grader) -> None:
    slow_wrong = "```python\nimport time\ndef f(x):\n    time.sleep(0.2)\n    return x + 1\n```"
    cfg = EpisodeConfig(mode="feedback", max_turns=64, time_limit=30.0, tool_time_limit=1.0)
    ep = await EpisodeRunner(fixed(slow_wrong), grader, cfg).run(double_task())
    assert ep.status == "tool_time_limit" and ep.scored and len(ep.turns) < 64
    assert ep.reward is not None and ep.reward.passed == 1  # graded on its last reply: f(1) == 2 only


def test_the_tool_time_budget_defaults_to_half_the_deadline() -> None:
    assert EpisodeConfig(time_limit=40.0).tool_budget == 20.0
    assert EpisodeConfig(time_limit=40.0, tool_time_limit=90.0).tool_budget == 90.0  # (the deadline skips it)
    with pytest.raises(ValidationError, match="greater than 0"):
        EpisodeConfig(tool_time_limit=0)


async def test_the_slot_clock_counts_time_holding_a_slot_not_queueing_for_one() -> None:
    slots = asyncio.Semaphore(1)
    clock = SlotClock(slots)
    await slots.acquire()  # another episode's run holds the only slot

    async def run() -> None:
        async with clock.held():
            await asyncio.sleep(0.05)  # (the host's own work for a call: counted)

    waiting = asyncio.create_task(run())
    await asyncio.sleep(0.5)
    slots.release()
    await waiting
    assert 0.05 <= clock.seconds < 0.4


async def test_a_runs_wait_in_the_pools_own_queue_is_not_the_episodes(grader: Grader) -> None:
    # eight episodes' runs of 0.6 s on the shared pool of 4, with no scheduler slots: four wait a
    # whole run for the pool (the default scheduler's slots are twice the pool's). Counted, the wait
    # spent an honest episode's budget on its neighbours' runs.
    nap = tool("run_code", code="import time\ntime.sleep(0.6)").tool_calls[0]
    boxes = [Toolbox(double_task(), grader.sandbox, tools=["run_code"]) for _ in range(2 * grader.sandbox.pool_size)]
    start = time.perf_counter()
    results = await asyncio.gather(*(box.call(nap) for box in boxes))
    assert time.perf_counter() - start >= 1.2  # (the queue did form)
    assert all("Accepted" in r.observation for r in results), [r.observation for r in results]
    assert max(r.seconds for r in results) >= 1.2  # a call's own time still says how long it took
    assert all(0.6 <= box.clock.seconds < 1.0 for box in boxes), [box.clock.seconds for box in boxes]


async def test_calls_past_max_tool_calls_are_answered_not_run(grader: Grader) -> None:
    write = tool("write_file", path="big.txt", content="x" * 100_000)
    flood = Completion(
        text="",
        tool_calls=[ToolCall(id=f"r{i}", name="read_file", arguments={"path": "big.txt"}) for i in range(300)],
        completion_tokens=5,
    )
    ep = await EpisodeRunner(fixed(write, flood), grader, EpisodeConfig(mode="tools", max_turns=2)).run(double_task())
    results = ep.turns[1].tool_results
    assert len(results) == 300  # every call has its answer (an OpenAI conversation needs one each)
    not_run = [r for r in results if r.observation.startswith("error: not run")]
    assert len(not_run) == 300 - 16
    replies = [m for m in ep.messages if m["role"] == "tool"][1:]
    assert len(replies) == 300 and sum(len(m["content"]) for m in replies) < 60_000  # was ~609,000
    assert ep.status == "turn_limit" and ep.scored


async def test_a_conversation_past_the_context_is_graded_on_its_last_candidate(grader: Grader) -> None:
    policy = ScriptedPolicy(lambda _m, i: WRONG if i == 0 else ContextFull(FULL))
    ep = await EpisodeRunner(policy, grader, EpisodeConfig(mode="feedback", max_turns=3)).run(double_task())
    single = await EpisodeRunner(fixed(WRONG), grader).run(double_task())
    assert ep.status == "context_limit" and ep.scored and len(ep.turns) == 1
    assert ep.value == single.value and ep.value is not None and ep.value < 1.0
    tools = ScriptedPolicy(lambda _m, i: tool("run_code", code="print(7)") if i == 0 else ContextFull(FULL))
    ep = await EpisodeRunner(tools, grader, EpisodeConfig(mode="tools", max_turns=4)).run(double_task())
    assert ep.status == "context_limit" and ep.scored and ep.final == "```python\nprint(7)\n```"


async def test_a_prompt_past_the_context_is_unscored(grader: Grader) -> None:
    ep = await EpisodeRunner(fixed(ContextFull(FULL)), grader).run(double_task())
    assert ep.status == "prompt_too_long" and not ep.scored and ep.reward is None and not ep.turns
    assert "maximum context length" in (ep.error or "")


async def test_one_reply_of_slow_runs_ends_at_the_budget_not_the_deadline(grader: Grader) -> None:
    # 16 calls of 1.5 s in one reply (24 s): the budget was checked only between replies, and the
    # deadline counted the runs, so they ran past it
    nap = {"code": "import time\ntime.sleep(1.5)"}
    calls = [ToolCall(id=f"s{i}", name="run_code", arguments=nap) for i in range(16)]
    slow = Completion(text="", tool_calls=calls, completion_tokens=5)
    cfg = EpisodeConfig(mode="tools", max_turns=4, time_limit=4.0)  # the tools' budget: 2 s
    ep = await EpisodeRunner(fixed(slow), grader, cfg).run(double_task())
    said = [r.observation for r in ep.turns[0].tool_results]
    assert ep.status == "tool_time_limit" and ep.scored and ep.value == 0.0, (ep.status, ep.error)
    assert "Accepted" in said[0] and "Accepted" in said[1] and len(ep.turns) == 1, said[:3]
    assert len(said) == 16 and all(s == "error: not run: the episode's sandbox time is spent" for s in said[2:])
    submitted = Completion(text="", tool_calls=[*calls[:3], ToolCall(id="f", name="submit", arguments={"code": "x"})])
    ep = await EpisodeRunner(fixed(submitted), grader, cfg).run(double_task())
    assert ep.status == "submitted" and ep.final == "```python\nx\n```"  # a submit past the budget still counts


async def test_a_long_reply_on_a_working_server_is_graded_not_past_the_deadline(grader: Grader) -> None:
    """A reply's decoding counts against the deadline only past its ``max_tokens`` at the slowest
    working pace: a wrong reply long on purpose (here 0.6 s of decoding against a 0.3 s deadline;
    8,192 tokens at 20 a second against 600 s) had ended ``deadline``, no reward, where a terse one
    scored 0. It scores 0; a server slower than that pace still reaches the deadline."""
    verbose = ScriptedPolicy(lambda _m, _i: Completion(text=WRONG, completion_tokens=64), delay=0.6)
    cfg = EpisodeConfig(time_limit=0.3, sampling=SamplingParams(max_tokens=64))  # (6.4 s of decoding allowed)
    ep = await EpisodeRunner(verbose, grader, cfg).run(double_task())
    assert (ep.status, ep.value) == ("answered", 0.0), (ep.status, ep.error)
    assert ep.policy_seconds >= 0.6
    # what is past the allowance counts: two turns of 0.6 s each against 0.1 s allowed and 0.8 s of deadline
    slow = ScriptedPolicy(lambda _m, _i: WRONG, delay=0.6)
    cfg = EpisodeConfig(mode="feedback", max_turns=3, time_limit=0.8, sampling=SamplingParams(max_tokens=1))
    ep = await EpisodeRunner(slow, grader, cfg).run(double_task())
    assert ep.status == "deadline" and ep.reward is None and len(ep.turns) == 1, (ep.status, len(ep.turns))


async def test_waits_for_a_busy_fleet_do_not_count_against_the_deadline(grader: Grader) -> None:
    # four episodes share one slot: each holds it ~1.5 s in all (its budget), but waits ~4.5 s more
    # for it; counted, the waits had ended every episode at the deadline, unscored
    slot = asyncio.Semaphore(1)
    sleeper = tool("run_code", code="import time\ntime.sleep(0.5)")
    cfg = EpisodeConfig(mode="tools", max_turns=64, time_limit=3.0)
    runner = EpisodeRunner(fixed(sleeper), grader, cfg, sandbox_slots=slot)
    episodes = await asyncio.gather(*(runner.run(double_task(), sample_index=i) for i in range(4)))
    assert [ep.status for ep in episodes] == ["tool_time_limit"] * 4, [(ep.status, ep.error) for ep in episodes]
    assert all(ep.scored and ep.value == 0.0 for ep in episodes)
    assert max(ep.wall_seconds for ep in episodes) > cfg.time_limit  # (the waits did happen)


async def test_a_request_the_server_refuses_for_the_policys_replies_is_graded(grader: Grader) -> None:
    # a chat template that takes one tool call per message refuses the conversation after a reply of
    # two: unscored (a policy error), the episode dodged its 0 on every retry
    refused = RequestRefused("refused the request (400): This model only supports single tool-calls at once!")
    policy = ScriptedPolicy(lambda _m, i: WRONG if i == 0 else refused)
    ep = await EpisodeRunner(policy, grader, EpisodeConfig(mode="feedback", max_turns=3)).run(double_task())
    assert ep.status == "request_refused" and ep.scored and ep.value is not None and ep.value < 1.0
    first = await EpisodeRunner(fixed(refused), grader).run(double_task())  # the task's own request: the setup's
    assert first.status == "prompt_refused" and not first.scored and "single tool-calls" in (first.error or "")


async def test_a_served_users_brief_past_its_context_is_unscored(grader: Grader) -> None:
    # the user model cannot say its first line: that is the setup's, not the policy's (it was graded 0)
    from dojo.tasks import load_source

    task = load_source("tau2:retail?n=1")[0]
    user = fixed(ContextFull(FULL))
    ep = await EpisodeRunner(fixed("Hello"), grader, EpisodeConfig(mode="tools", max_turns=3), user=user).run(task)
    assert ep.status == "prompt_too_long" and not ep.scored and "user model" in (ep.error or "")


async def test_a_user_model_that_refuses_the_conversation_ends_it_graded(grader: Grader) -> None:
    # a template that takes turns refused two agent texts in a row (a reply with a call, then one
    # without): the refusal was a policy error, so the episode dodged its 0 on every retry
    from dojo.tasks import load_source

    task = load_source("tau2:retail?n=1")[0]

    def strict(messages: list[dict[str, object]], i: int) -> object:
        roles = [m["role"] for m in messages if m["role"] != "system"]
        if any(a == b for a, b in itertools.pairwise(roles)):
            return RequestRefused("refused (400): Conversation roles must alternate user/assistant/user/assistant")
        return "Hi, I need help with an order." if i == 0 else RequestRefused("refused (400): any later line")

    call = ToolCall(id="c0", name="find_user_id_by_name_zip", arguments={"first_name": "A", "last_name": "B"})
    agent = fixed(Completion(text="Let me look you up.", tool_calls=[call], completion_tokens=5), "Sorry, I cannot.")
    cfg = EpisodeConfig(mode="tools", max_turns=6)
    ep = await EpisodeRunner(agent, grader, cfg, user=ScriptedPolicy(strict)).run(task)  # type: ignore[arg-type]
    assert ep.status == "answered" and ep.scored and ep.value == 0.0, (ep.status, ep.error)
    said = [m for m in ep.messages if m["role"] == "assistant" and m.get("content")]
    assert len(said) == 3  # the greeting, and both agent texts: the user saw the two as one


def test_the_clock_counts_runs_side_by_side_once_and_never_their_waits() -> None:
    from dojo.agent.sandbox_clock import run_seconds, tool_seconds
    from dojo.sandbox import ExecutionResult, StepResult, Verdict

    assert tool_seconds(0.0, 1.0, [(0.0, 1.0, 0.5)]) == 0.5  # 0.5 s queued, 0.5 s run
    # a visible check's four runs side by side after a 2 s queue: they had counted 2 s, the wait too
    assert tool_seconds(0.0, 2.5, [(0.0, 2.5, 0.5)] * 4) == 0.5
    assert tool_seconds(0.0, 1.2, [(0.0, 0.5, 0.5), (0.5, 1.0, 0.5)]) == 1.2  # two runs, then 0.2 s of the host's
    assert tool_seconds(0.0, 0.05, []) == 0.05
    step = StepResult(exit_code=1, wall_time=0.5)
    failed = ExecutionResult(verdict=Verdict.COMPILE_ERROR, exit_code=1, wall_time=0.5, compile=step)
    assert run_seconds(failed) == 0.5  # (a compile error's result is its compile step: it had counted twice)
    ran = ExecutionResult(verdict=Verdict.ACCEPTED, exit_code=0, wall_time=0.25, compile=step)
    assert run_seconds(ran) == 0.75
    # a cached build did not compile for this run: its first compile's time had been counted again
    cached = step.model_copy(update={"cached": True})
    assert run_seconds(ran.model_copy(update={"compile": cached})) == 0.25
    assert run_seconds(failed.model_copy(update={"compile": cached})) == 0.0


async def test_a_final_answer_that_sleeps_through_its_runs_limits_is_graded(grader: Grader) -> None:
    # the grade's deadline was the episode's time_limit: a final answer whose run slept to the task's
    # wall limit (a SciCode task's is 600 s, the default time_limit's too) ended `deadline`, unscored
    from dojo.sandbox import Limits

    sleeper = "```python\nimport time\ndef f(x):\n    time.sleep(1000)\n```"
    task = double_task().model_copy(update={"limits": Limits(wall_time=2.0, cpu_time=2.0)})
    cfg = EpisodeConfig(mode="feedback", max_turns=1, time_limit=2.0)
    ep = await EpisodeRunner(fixed(sleeper), grader, cfg).run(task)
    assert ep.status == "answered" and ep.scored and ep.value == 0.0, (ep.status, ep.error)
    assert ep.reward is not None and ep.grade_seconds >= 2.0  # (graded past the episode's own time_limit)
