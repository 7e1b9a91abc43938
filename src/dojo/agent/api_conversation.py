"""An episode's conversation over a task's simulated API (``Task.api``: BFCL's multi-turn tasks).

The user speaks once per turn (the task's ``api.turns``). Within a turn the model calls the API's
tools; each step's calls run on the API in the sandbox and their results come back as tool
messages; a reply without a call ends the turn, and the user's next message begins the next. The
API is deterministic, so each step replays the conversation's calls so far from the initial state
in one run (``dojo.rewards.simulated_api``) and shows the results of the new calls: no state lives
between runs. Tools held back until a turn (``api.added``) are offered from that turn on.

The answer graded at the end is every call of every step of every turn, and what the replies said
(``answer()``).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from dojo.agent.policy import ToolCall
from dojo.agent.sandbox_clock import MeteredSandbox, SlotClock
from dojo.agent.tools import ToolResult, truncate_middle
from dojo.rewards.simulated_api import conversation_steps, run_api_calls, tau2_cut_short
from dojo.sandbox import Limits, SandboxAPI
from dojo.tasks.model import ApiScenario, Task

MAX_STEPS_PER_TURN = 20  # BFCL's limit: a turn whose model keeps calling past it ends there


class ApiConversation:
    """One episode's calls on ``task``'s API, turn by turn."""

    def __init__(
        self,
        task: Task,
        sandbox: SandboxAPI,
        *,
        limits: Limits | None = None,
        max_observation_chars: int = 2000,
        sandbox_slots: asyncio.Semaphore | None = None,
        time_budget: float | None = None,
        paused: Callable[[], AbstractContextManager[None]] | None = None,
    ) -> None:
        if task.api is None:
            raise ValueError(f"task {task.id} has no simulated API")
        self.task = task
        self.api: ApiScenario = task.api
        self.sandbox = MeteredSandbox(sandbox)  # (its runs are what the clock counts)
        self.limits = limits
        self.max_observation_chars = max_observation_chars
        self.clock = SlotClock(sandbox_slots, time_budget, paused)
        self.turn = 0
        self.steps: list[list[list[dict[str, Any]]]] = [[] for _ in self.api.turns]
        self.said: list[str] = []  # the model's replies' text (what it told the user)
        self.errors = 0  # calls that failed (raised, or named no tool offered)

    @property
    def turn_exhausted(self) -> bool:
        """The current turn has used its steps (the model's next call would not run)."""
        return len(self.steps[self.turn]) >= MAX_STEPS_PER_TURN

    @property
    def cut_short(self) -> str | None:
        """Why tau2 would end this conversation here (a final-state task: 10 failed calls, or 100
        steps), or None. The grader scores such a conversation 0, so the episode ends too."""
        if self.api.check != "final_state":
            return None
        solo = self.task.tests[0].expected.get("asserts") is not None
        steps = conversation_steps(json.loads(self.answer()), len(self.api.turns), solo=solo)
        return tau2_cut_short(self.errors, steps)

    def specs(self) -> list[dict[str, Any]]:
        """The tools offered at the current turn."""
        return self.api.offered(self.task.tools, self.turn)

    def next_turn(self) -> str | None:
        """End the current turn: the user's message that begins the next, or None after the last."""
        if self.turn + 1 >= len(self.api.turns):
            return None
        self.turn += 1
        return self.api.turns[self.turn]

    def reply(self, text: str) -> None:
        """Record what a reply told the user (a check may need it: tau2's information to give)."""
        if text.strip():
            self.said.append(text)

    def answer(self) -> str:
        """Every call made, per turn and step, and every reply's text: what the grader scores."""
        return json.dumps({"turns": self.steps, "said": self.said})

    async def step(self, calls: list[ToolCall]) -> list[ToolResult]:
        """Make ``calls`` (one model reply's) on the API after all earlier ones; one result each.
        A sandbox failure sets ``infra_error`` on every result (the episode is not scored)."""
        made = [{"name": c.name, "arguments": dict(c.arguments)} for c in calls]
        before = sum(len(call_list) for turn in self.steps[: self.turn + 1] for call_list in turn)
        self.steps[self.turn].append(made)
        flat = [[c for step in turn for c in step] for turn in self.steps[: self.turn + 1]]
        start = time.perf_counter()
        async with self.clock.held():
            run = await run_api_calls(self.task, flat, self.sandbox, self.limits, observe_from=before)
        seconds = (time.perf_counter() - start) / max(1, len(calls))
        if run.infrastructure_error is not None:
            return [ToolResult(call=c, observation="", infra_error=run.infrastructure_error, seconds=seconds)
                    for c in calls]  # fmt: skip
        texts = [f"error: {run.problem}"] * len(calls) if run.problem is not None else run.observations()
        self.errors += len(calls) if run.problem is not None else run.errors(observed_only=True)
        return [
            ToolResult(call=c, observation=truncate_middle(t, self.max_observation_chars), seconds=seconds)
            for c, t in zip(calls, texts, strict=True)
        ]
