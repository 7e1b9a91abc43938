"""The agent loop with scripted replies and the real sandbox: what each kind of episode records."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from dojo.agent.episode import EpisodeConfig, EpisodeRunner
from dojo.agent.policy import Completion, OpenAIPolicy, SamplingParams, ToolCall
from dojo.agent.turn_rewards import ProcessScorer
from dojo.rewards import Grader
from dojo.rewards.mapping import SHOWN_ONLY
from dojo.sandbox import AsyncSandbox, ExecutionResult
from dojo.tasks.model import Task
from tests.agent.scripted import (
    PARTLY,
    RIGHT,
    SPECIAL,
    WRONG,
    Reply,
    ScriptedPolicy,
    answer_task,
    broken,
    double_task,
    fixed,
    tool,
)
from tests.sandbox.conftest import requires_sandbox_pytest

FEEDBACK3 = EpisodeConfig(mode="feedback", max_turns=3)
TOOLS4 = EpisodeConfig(mode="tools", max_turns=4)


async def test_single_turn_is_one_call_graded_on_hidden_tests(grader: Grader) -> None:
    ep = await EpisodeRunner(fixed(RIGHT), grader).run(double_task())
    assert (ep.status, len(ep.turns), ep.value) == ("answered", 1, 1.0)
    assert ep.reward is not None and ep.reward.total == 6
    special = await EpisodeRunner(fixed(SPECIAL), grader).run(double_task())
    # fitting the visible tests alone earns nothing (a table of them had earned 0.5)
    assert special.reward is not None and (special.value, special.reward.verdict) == (0.0, "fail")
    assert SHOWN_ONLY in special.reward.flags
    assert [m["role"] for m in ep.messages] == ["user", "assistant"]
    assert ep.wall_seconds >= ep.policy_seconds >= 0 and ep.grade_seconds > 0


async def test_feedback_loop_fixes_the_code(grader: Grader) -> None:
    policy = fixed(WRONG, RIGHT)
    ep = await EpisodeRunner(policy, grader, FEEDBACK3).run(double_task())
    assert (ep.status, len(ep.turns), ep.value) == ("answered", 2, 1.0)
    feedback = ep.messages[2]
    assert feedback["role"] == "user" and "1/2 tests passed" in feedback["content"]
    # the model saw the failure of a visible test, never a hidden expectation (20 = f(10))
    assert "20" not in json.dumps(policy.calls[1])
    assert ep.turns[0].tool_results[0].verdict == "partial"


async def test_feedback_stops_once_the_visible_tests_pass(grader: Grader) -> None:
    ep = await EpisodeRunner(fixed(SPECIAL, RIGHT), grader, FEEDBACK3, process=ProcessScorer()).run(double_task())
    assert len(ep.turns) == 1 and ep.status == "answered" and ep.value == 0.0
    assert ep.turn_rewards == [{"total": 0.0}]  # no progress paid for the shown examples (it had been 1.0)


async def test_feedback_runs_out_of_turns_and_grades_the_last_reply(grader: Grader) -> None:
    ep = await EpisodeRunner(fixed(WRONG), grader, FEEDBACK3).run(double_task())
    assert (ep.status, len(ep.turns)) == ("turn_limit", 3)
    assert ep.reward is not None and ep.reward.verdict == "fail" and ep.value == 0.0  # right on a shown f(1) only
    half = "```python\ndef f(x):\n    return 2 * x if x < 5 else 0\n```"  # right on f(1), f(2), f(3), f(-4)
    ep = await EpisodeRunner(fixed(half), grader, FEEDBACK3).run(double_task())
    assert ep.reward is not None and ep.reward.verdict == "partial" and ep.value == 0.5


async def test_tools_run_code_files_and_submit(grader: Grader) -> None:
    policy = fixed(
        tool("write_file", path="data.txt", content="21"),
        tool("run_code", code="print(int(open('data.txt').read()) * 2)"),
        tool("run_tests", code=RIGHT),
        tool("submit", code="def f(x):\n    return 2 * x"),
    )
    ep = await EpisodeRunner(policy, grader, TOOLS4).run(double_task())
    assert (ep.status, ep.value) == ("submitted", 1.0)
    observations = [m["content"] for m in ep.messages if m["role"] == "tool"]
    assert observations[0].startswith("wrote data.txt")
    assert "verdict: Accepted" in observations[1] and "42" in observations[1]
    assert observations[2].startswith("pass: 2/2")
    assert ep.messages[0]["role"] == "system" and "<tool_call>" in ep.messages[0]["content"]
    assert [r.call.name for t in ep.turns for r in t.tool_results] == ["write_file", "run_code", "run_tests", "submit"]
    assert all(r.seconds >= 0 for t in ep.turns for r in t.tool_results)


async def test_text_tool_calls_and_a_final_reply(grader: Grader) -> None:
    call = '<tool_call>\n{"name": "run_code", "arguments": {"code": "print(6 * 7)"}}\n</tool_call>'
    ep = await EpisodeRunner(fixed(call, RIGHT), grader, TOOLS4).run(double_task())
    assert ep.status == "answered" and len(ep.turns) == 2 and ep.value == 1.0
    assert "42" in ep.messages[-2]["content"]


async def test_tool_errors_are_observations_not_crashes(grader: Grader) -> None:
    policy = fixed(
        tool("delete_everything", path="/"),
        "<tool_call>{oops</tool_call>",
        tool("read_file", path="missing.txt"),
        tool("write_file", path="../escape", content="x"),
    )
    ep = await EpisodeRunner(policy, grader, TOOLS4).run(double_task())
    errors = [m["content"] for m in ep.messages if m["role"] == "tool"]
    assert "unknown tool 'delete_everything'" in errors[0]
    assert "not JSON" in errors[1]
    assert "no file 'missing.txt'" in errors[2]
    assert errors[3].startswith("error:") and ".." in errors[3]
    assert ep.status == "turn_limit" and ep.reward is not None  # still graded (no code: no_answer)


async def test_calls_made_to_break_the_episode_are_observations_not_crashes(grader: Grader) -> None:
    """Each of these ended the episode with an exception (and so the whole rollout) or a sandbox
    failure (no reward): a file named as the program's own, a file where a directory must be, a
    lone surrogate, arguments nested past what the trajectory store serializes."""
    deep = "<tool_call>" + json.dumps({"name": "write_file", "arguments": {"path": "d", "content": [[[[[]]]]]}})
    policy = fixed(
        tool("write_file", path="main.py", content="x"),
        tool("run_code", code="print(1)"),
        tool("write_file", path="a", content="x"),
        tool("write_file", path="a/b", content="y"),
        '<tool_call>{"name": "write_file", "arguments": {"path": "s", "content": "\\ud800"}}</tool_call>',
        deep.replace("[[[[[]]]]]", "[" * 300 + "]" * 300) + "</tool_call>",
        tool("submit", code="def f(x):\n    return 2 * x"),
    )
    ep = await EpisodeRunner(policy, grader, EpisodeConfig(mode="tools", max_turns=8)).run(double_task())
    said = [m["content"] for m in ep.messages if m["role"] == "tool"]
    assert "clashes with the source file" in said[1], said[1]
    assert said[3].startswith("error:") and "cannot both be files" in said[3], said[3]
    assert "surrogate" in said[4] and "nested more than" in said[5], said[4:6]
    assert ep.status == "submitted" and ep.reward is not None and ep.reward.value == 1.0, (ep.status, ep.reward)


async def test_files_that_clash_with_the_tasks_own_are_refused(grader: Grader) -> None:
    """A file where the task's data or tree has a directory (an analysis task's ``data``, a shell
    task's top directory), or a name past 255 bytes, failed every later run as the sandbox's error:
    the episode ended without a reward instead of its 0."""
    from dojo.rewards.analysis import task_files
    from dojo.tasks import load_source

    analysis = load_source("family:data_analysis?n=1")[0]
    shell = load_source("family:terminal?n=1")[0]
    top = next(iter(shell.workspace.files)).split("/")[0] if shell.workspace else "x"
    under = task_files(analysis)[0].path + "/x"  # (a data file is no directory)
    for task, path in ((analysis, "data"), (analysis, under), (shell, top), (double_task(), "é" * 200)):
        code = "echo 1" if task.language == "bash" else "print(1)"
        policy = fixed(tool("write_file", path=path, content="x"), tool("run_code", code=code), "done")
        ep = await EpisodeRunner(policy, grader, TOOLS4).run(task)
        said = [m["content"] for m in ep.messages if m["role"] == "tool"]
        assert said[0].startswith("error:") and "Accepted" in said[1], (path, said)
        assert ep.scored, (path, ep.status, ep.error)


async def test_long_output_is_cut_in_the_middle(grader: Grader) -> None:
    code = "print('A' * 50000); print('THE END')"
    ep = await EpisodeRunner(fixed(tool("run_code", code=code), RIGHT), grader, TOOLS4).run(double_task())
    observation = ep.messages[3]["content"]
    assert len(observation) < 3000 and "characters cut" in observation and "THE END" in observation


async def test_answer_task_submits_an_answer(grader: Grader) -> None:
    policy = fixed(tool("run_code", code="print(17 + 25)"), tool("submit", answer="42"))
    ep = await EpisodeRunner(policy, grader, TOOLS4).run(answer_task())
    assert (ep.status, ep.value) == ("submitted", 1.0)
    single = await EpisodeRunner(fixed("The answer is <answer>41</answer>"), grader).run(answer_task())
    assert single.value == 0.0 and single.reward is not None and single.reward.verdict == "fail"


async def test_token_budget_ends_the_episode(grader: Grader) -> None:
    big = Completion(text=PARTLY, completion_tokens=300)
    cfg = EpisodeConfig(mode="feedback", max_turns=5, max_total_tokens=500)
    ep = await EpisodeRunner(fixed(big), grader, cfg).run(double_task())
    assert ep.status == "token_limit" and len(ep.turns) == 2 and ep.completion_tokens == 600
    assert ep.reward is not None and ep.reward.value == 0.5  # graded on the last reply


async def test_deadline_and_policy_failure_leave_no_reward(grader: Grader) -> None:
    # a server slower than the slowest working pace (a reply of up to 2 tokens in 5 s) is the set-up's
    slow = ScriptedPolicy(lambda _m, _i: RIGHT, delay=5.0)
    cfg = EpisodeConfig(time_limit=0.2, sampling=SamplingParams(max_tokens=2))
    ep = await EpisodeRunner(slow, grader, cfg).run(double_task())
    assert ep.status == "deadline" and ep.reward is None and not ep.scored
    assert ep.policy_seconds >= 0.2  # (the request the deadline ended is counted)
    failed = await EpisodeRunner(fixed(broken()), grader).run(double_task())
    assert failed.status == "policy_error" and failed.reward is None and "connection refused" in (failed.error or "")


class _BrokenSandbox(AsyncSandbox):
    async def run(self, *args: object, **kwargs: object) -> ExecutionResult:
        return ExecutionResult.from_sandbox_error("slot died", "python")


async def test_sandbox_failure_is_never_a_zero() -> None:
    grader = Grader(_BrokenSandbox(pool_size=1))
    ep = await EpisodeRunner(fixed(RIGHT), grader).run(double_task())
    assert ep.status == "infra_error" and ep.reward is not None and ep.reward.value is None and not ep.scored
    tools = await EpisodeRunner(fixed(tool("run_code", code="print(1)")), grader, TOOLS4).run(double_task())
    assert tools.status == "infra_error" and "slot died" in (tools.error or "")


async def test_episode_with_the_tiny_model_through_openai(policy_server: str, grader: Grader) -> None:
    policy = OpenAIPolicy(policy_server)
    cfg = EpisodeConfig(mode="feedback", max_turns=2, sampling=SamplingParams(max_tokens=24))
    ep = await EpisodeRunner(policy, grader, cfg).run(double_task())
    await policy.close()
    assert ep.scored and ep.reward is not None  # random text is graded (0), not an error
    for turn in ep.turns:
        c = turn.completion
        assert c.token_ids is not None and c.logprobs is not None and len(c.token_ids) == len(c.logprobs) <= 24
    assert ep.completion_tokens == sum(len(t.completion.token_ids or []) for t in ep.turns)
    assert ep.prompt_tokens > 0


async def test_concurrent_episodes_share_one_sandbox(grader: Grader, tiny_model_dir: Path) -> None:
    runner = EpisodeRunner(fixed(WRONG, RIGHT), grader, FEEDBACK3)
    eps = await asyncio.gather(*(runner.run(double_task(f"t{i}")) for i in range(12)))
    assert {ep.task_id for ep in eps} == {f"t{i}" for i in range(12)}
    assert all(ep.scored for ep in eps)


def test_config_rejects_nonsense() -> None:
    with pytest.raises(ValueError, match="max_turns"):
        EpisodeConfig(max_turns=0)
    with pytest.raises(ValueError, match="mode"):
        EpisodeConfig(mode="chaos")  # type: ignore[arg-type]


@requires_sandbox_pytest
async def test_a_repo_task_is_fixed_through_the_shell_and_an_edit(grader: Grader) -> None:
    """An agent looks at the failing test in the shell, reads the module, edits it, runs the
    visible tests, submits: the edits are what the grader scores, on every test."""
    from tests.rewards.test_repo import small_task

    task = small_task()
    policy = fixed(
        tool("run_shell", command="python3 -m pytest -q mypkg/tests/test_ops.py 2>&1 | tail -3"),
        tool("read_file", path="mypkg/__init__.py"),
        tool("edit_file", path="mypkg/__init__.py", search="return a - b", replace="return a + b"),
        tool("run_tests"),
        tool("submit"),
    )
    ep = await EpisodeRunner(policy, grader, EpisodeConfig(mode="tools", max_turns=6)).run(task)
    assert ep.status == "submitted" and ep.passed and ep.value == 1.0, ep
    observations = [r.observation for turn in ep.turns for r in turn.tool_results]
    assert "1 failed, 1 passed" in observations[0]
    assert task.workspace is not None
    assert observations[1] == task.workspace.files["mypkg/__init__.py"]  # the file as it is, nothing before it
    assert observations[2] == "edited mypkg/__init__.py"
    assert observations[3].startswith("pass: 1/1")
    system = ep.messages[0]["content"]
    assert "run_shell" in system and "edit_file" in system and "run_code" not in system


@requires_sandbox_pytest
async def test_a_repo_agent_cannot_edit_the_tests(grader: Grader) -> None:
    from tests.rewards.test_repo import small_task

    policy = fixed(
        tool("write_file", path="mypkg/tests/test_ops.py", content="def test_add():\n    pass\n"),
        tool("edit_file", path="conftest.py", search="x", replace="y"),
        tool("submit"),
    )
    ep = await EpisodeRunner(policy, grader, EpisodeConfig(mode="tools", max_turns=4)).run(small_task())
    observations = [r.observation for turn in ep.turns for r in turn.tool_results]
    assert all("protected" in o for o in observations[:2]), observations
    assert ep.value == 0.0 and ep.reward is not None and ep.reward.verdict == "no_answer"


async def test_a_tools_task_is_answered_by_its_calls(grader: Grader) -> None:
    """A BFCL task: its own functions are offered natively; the first reply's calls are the answer,
    graded without running anything."""
    from dojo.tasks import load_source

    [task] = load_source("bfcl:simple_python?n=1&seed=0")
    reference = task.reference or ""
    right = fixed(reference)
    ep = await EpisodeRunner(right, grader, EpisodeConfig(mode="tools", max_turns=3)).run(task)
    assert ep.status == "submitted" and ep.value == 1.0, ep
    assert ep.messages[0]["role"] == "system" and task.tools[0]["function"]["name"] in ep.messages[0]["content"]
    prose = await EpisodeRunner(fixed("I can't."), grader, EpisodeConfig(mode="tools")).run(task)
    assert prose.status == "answered" and prose.value == 0.0
    single = await EpisodeRunner(fixed(reference), grader, EpisodeConfig()).run(task)  # feedback mode, one turn
    assert single.value == 1.0


async def test_a_shell_agent_runs_its_commands_on_the_tasks_tree(grader: Grader) -> None:
    from tests.rewards.test_shell import cleanup_task

    task = cleanup_task()
    policy = fixed(
        tool("run_code", code="find . -name '*.tmp' | sort"), tool("submit", code="find . -name '*.tmp' -delete")
    )
    ep = await EpisodeRunner(policy, grader, EpisodeConfig(mode="tools", max_turns=3)).run(task)
    [look] = ep.turns[0].tool_results
    assert "./a/x.tmp" in look.observation and "./b/c/y.tmp" in look.observation
    assert ep.status == "submitted" and ep.value == 1.0, ep


def _gold_player(task: Task, *, skip_turn: int | None = None) -> ScriptedPolicy:
    """Plays a multi-turn API task's gold calls: a turn's calls one per step, then a reply
    without a call (the turn is done); ``skip_turn``: that turn gets no call."""
    from dojo.tasks.gold_calls import gold_turns, keyword_arguments

    gold = [[(c["name"], keyword_arguments(task, c)) for c in turn] for turn in gold_turns(task)]

    def script(messages: list[dict[str, Any]], _i: int) -> Reply:
        turn = sum(m["role"] == "user" for m in messages) - 1
        made = 0
        for m in reversed(messages):
            if m["role"] == "user":
                break
            made += m["role"] == "tool"
        if turn == skip_turn or made >= len(gold[turn]):
            return "Done."
        name, args = gold[turn][made]
        return Completion(text="", tool_calls=[ToolCall(id=f"c{turn}-{made}", name=name, arguments=args)],
                          completion_tokens=5)  # fmt: skip

    return ScriptedPolicy(script)


async def test_a_multi_turn_api_task_is_a_conversation(grader: Grader) -> None:
    """BFCL multi-turn: each step's calls run on the simulated API and their results come back; a
    reply without a call ends the turn and the user's next message follows; tools held back are
    offered from their turn; every call of every turn is graded."""
    from dojo.tasks import load_source

    tasks = load_source("bfcl:multi_turn_miss_func?n=10&seed=2")
    task = next(t for t in tasks if t.api and t.api.added and len(gold_turns_of(t)[0]) >= 2)
    assert task.api is not None
    config = EpisodeConfig(mode="tools", max_turns=64, max_total_tokens=100_000)
    player = _gold_player(task)
    ep = await EpisodeRunner(player, grader, config).run(task)
    assert ep.status == "answered" and ep.value == 1.0, ep.reward
    users = [m["content"] for m in ep.messages if m["role"] == "user"]
    assert users == task.api.turns
    observations = [m["content"] for m in ep.messages if m["role"] == "tool"]
    assert len(observations) == sum(len(t) for t in gold_turns_of(task))
    assert not any("there is no function" in o for o in observations)
    assert all(r.seconds >= 0 for t in ep.turns for r in t.tool_results)
    # natively offered tools follow the turns: the held-back ones only from their turn on
    [(turn, names)] = task.api.added.items()
    for messages, offered in zip(player.calls, player.offered, strict=True):
        at = sum(m["role"] == "user" for m in messages) - 1
        assert set(names) <= set(offered) if at >= turn else not set(names) & set(offered)
    skipped = await EpisodeRunner(_gold_player(task, skip_turn=0), grader, config).run(task)
    assert skipped.status == "answered" and skipped.reward is not None and skipped.reward.passed == 0
    assert skipped.value == 0.0
    short = await EpisodeRunner(_gold_player(task), grader, config.model_copy(update={"max_turns": 2})).run(task)
    assert short.status == "turn_limit" and short.reward is not None and short.reward.verdict != "pass"


def gold_turns_of(task: Task) -> list[list[str]]:
    from dojo.tasks.gold_calls import gold_calls

    return gold_calls(task)
