"""The one feedback step every multi-turn loop takes (episode runner, TRL rollout_func, verl)."""

from __future__ import annotations

from typing import Any

from dojo.agent.feedback import FEEDBACK_MESSAGE, feedback_step
from dojo.agent.tools import Toolbox
from dojo.sandbox import AsyncSandbox, ExecutionResult
from dojo.tasks import Task, TestCase

SQUARE = Task(id="sq", form="function", prompt="Write square(x).", entry_point="square",
              tests=[TestCase(args=[2], expected=4, visible=True), TestCase(args=[3], expected=9)])  # fmt: skip


class DeadSandbox:
    async def run(self, program: Any, limits: Any = None, **kw: Any) -> ExecutionResult:
        return ExecutionResult.from_sandbox_error("slot slot-0 died during the run", "python")


async def test_the_stop_rules(fast_sandbox: AsyncSandbox) -> None:
    toolbox = Toolbox(SQUARE, fast_sandbox)
    passed = await feedback_step(toolbox, "def square(x):\n    return x * x\n", last_turn=False)
    assert passed.outcome == "passed" and passed.done and passed.message is None and passed.checked
    failed = await feedback_step(toolbox, "def square(x):\n    return x + x + 1\n", last_turn=False)
    assert failed.outcome == "failed" and not failed.done and failed.verdict == "fail"
    assert failed.message == {"role": "user", "content": FEEDBACK_MESSAGE.format(feedback=failed.observation)}
    assert "returned 5" in failed.observation  # the visible test's detail, never a hidden one's
    last = await feedback_step(toolbox, "def square(x):\n    return 0\n", last_turn=True)
    assert last.outcome == "last_turn" and last.done and not last.checked
    hidden_only = SQUARE.model_copy(update={"tests": [t.model_copy(update={"visible": False}) for t in SQUARE.tests]})
    none = await feedback_step(Toolbox(hidden_only, fast_sandbox), "anything", last_turn=False)
    assert none.outcome == "no_visible_tests" and none.done


async def test_a_sandbox_failure_ends_the_episode_without_a_reward() -> None:
    step = await feedback_step(Toolbox(SQUARE, DeadSandbox()), "def square(x):\n    return x * x\n", last_turn=False)  # type: ignore[arg-type]
    assert step.outcome == "infra_error" and step.done and "died" in (step.error or "")
