"""One feedback step: after a reply, check its code on the task's visible tests and say whether the
episode goes on, and with what message. The episode runner (``dojo.agent.episode``), the TRL
``rollout_func`` (``dojo.integrations.trl_rollout``) and the verl agent loop
(``dojo.integrations.verl``) all take this step, so they stop by the same rules:

1. a task without visible tests (or an answer task) has nothing to check: the reply is final;
2. the last turn's reply is final without a check (the grader will run every test anyway);
3. a sandbox failure ends the episode without a reward (``infra_error``);
4. a reply that passes the visible tests is final;
5. otherwise the failures go back as the next user message (``FEEDBACK_MESSAGE``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Literal

from dojo.agent.policy import ToolCall
from dojo.agent.tools import Toolbox, ToolResult, VisibleCheck

FEEDBACK_MESSAGE = "Your code did not pass the visible tests:\n{feedback}\nFix it and reply with the complete code."

FeedbackOutcome = Literal["no_visible_tests", "last_turn", "infra_error", "passed", "failed"]


@dataclass(frozen=True)
class FeedbackStep:
    """What checking one reply found. ``done``: the episode stops here; ``message``: the user turn
    to send back when it does not."""

    outcome: FeedbackOutcome
    observation: str = ""
    verdict: str | None = None  # the grade verdict on the visible tests, when they ran
    error: str | None = None  # the sandbox's failure, for ``infra_error``
    seconds: float = 0.0  # time spent running the visible tests
    passed: int | None = None  # the visible tests passed and run, as the grader counted them
    total: int | None = None

    @property
    def done(self) -> bool:
        return self.outcome != "failed"

    @property
    def checked(self) -> bool:
        """Whether the visible tests ran."""
        return self.outcome in ("infra_error", "passed", "failed")

    @property
    def message(self) -> dict[str, str] | None:
        if self.outcome != "failed":
            return None
        return {"role": "user", "content": FEEDBACK_MESSAGE.format(feedback=self.observation)}

    def tool_result(self, reply: str) -> ToolResult | None:
        """The check as the turn's tool result (a ``run_tests`` call on ``reply``), as episodes record
        it and per-turn rewards (``dojo.agent.turn_rewards``) read it; None when the tests did not run."""
        if not self.checked:
            return None
        check = ToolCall(id="feedback", name="run_tests", arguments={"code": reply})
        checked = VisibleCheck(self.observation, self.verdict, self.error, self.passed, self.total)
        return checked.tool_result(check).model_copy(update={"seconds": self.seconds})


async def feedback_step(toolbox: Toolbox, reply: str, *, last_turn: bool) -> FeedbackStep:
    """Check ``reply`` (a completion's text) on the visible tests of ``toolbox.task``."""
    task = toolbox.task
    if task.form == "answer" or not task.visible_tests:
        return FeedbackStep("no_visible_tests")
    if last_turn:
        return FeedbackStep("last_turn")
    start = time.perf_counter()
    checked = await toolbox.check_visible(reply)
    seconds = time.perf_counter() - start
    if checked.error is not None:
        return FeedbackStep("infra_error", checked.observation, checked.verdict, checked.error, seconds)
    outcome: FeedbackOutcome = "passed" if checked.verdict == "pass" else "failed"
    return FeedbackStep(outcome, checked.observation, checked.verdict, None, seconds, checked.passed, checked.total)
