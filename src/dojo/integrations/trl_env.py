"""A dojo task as a TRL tool-calling environment (``GRPOTrainer(environment_factory=...)``).

TRL makes one environment per rollout, calls ``reset(**row)`` with the dataset row, offers every
public method as a tool (its name, type hints and docstring become the tool schema), runs the
model's tool calls between generations, and finally calls ``get_reward()``. Here:

- ``reset`` reads the row's ``task`` column (``dojo.integrations.trl.task_rows``);
- ``run_code``, ``run_tests`` and ``submit`` are dojo's agent tools (``dojo.agent.tools``), run in a
  warm sandbox pool shared by all environments of one event loop;
- ``get_reward`` grades the submission on every test, hidden ones included, with dojo's ``Grader``.
  No submission scores 0 (the model did not answer); a sandbox failure anywhere in the rollout
  returns ``None``, which TRL leaves out of the reward: an infrastructure failure is never a 0.

Tool outputs are environment tokens: TRL masks them out of the loss (``tool_mask``).

    trainer = GRPOTrainer(model, args=args, train_dataset=Dataset.from_list(task_rows(tasks, chat=True)),
                          environment_factory=DojoToolEnv.factory(grading=GradingConfig(mode="binary")))
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from dojo.agent.policy import ToolCall
from dojo.agent.tools import Toolbox, ToolResult
from dojo.integrations.event_loops import SANDBOXES as _SANDBOXES
from dojo.rewards import Grader, GradingConfig
from dojo.rewards.config import DEFAULT_GRADING
from dojo.tasks.model import Task

_TOOLS = ("run_code", "run_tests", "submit")


class DojoToolEnv:
    """One rollout of a dojo task with tools. Configure through ``DojoToolEnv.factory(...)``."""

    def __init__(
        self,
        *,
        grading: GradingConfig = DEFAULT_GRADING,
        pool_size: int = 2,
        max_observation_chars: int = 2000,
    ) -> None:
        if pool_size < 1:
            raise ValueError(f"pool_size must be at least 1, got {pool_size}")
        self._grading = grading
        self._pool_size = pool_size
        self._max_observation_chars = max_observation_chars
        self.task: Task | None = None
        self.submission: str | None = None
        self.infra_error: str | None = None
        self.reward: float | None = None
        self.tool_calls = 0
        self._toolbox: Toolbox | None = None

    @classmethod
    def factory(cls, **settings: Any) -> Callable[[], DojoToolEnv]:
        """What to pass as ``environment_factory``: builds environments with these settings."""
        cls(**settings)  # validates now, not at the first rollout
        return functools.partial(cls, **settings)

    @classmethod
    async def close_sandboxes(cls) -> None:
        """Close the sandbox pool of the running event loop (TRL's: run it there at the end)."""
        await _SANDBOXES.close()

    def reset(self, **row: Any) -> str | None:
        """Start a rollout on the row's task. The prompt already carries the task, so nothing is added."""
        task = row.get("task")
        if task is None:
            raise ValueError(
                "the dataset row has no `task` column; "
                "build rows with dojo.integrations.trl.task_rows(tasks, chat=True)"
            )
        self.task = task if isinstance(task, Task) else Task.model_validate_json(task)
        self.submission = None
        self.infra_error = None
        self.reward = None
        self.tool_calls = 0
        self._toolbox = None
        return None

    async def _call(self, name: str, **arguments: str) -> str:
        if self.task is None:
            raise RuntimeError("reset() was not called: TRL resets every environment before a rollout")
        if self._toolbox is None:
            sandbox = await _SANDBOXES.get(self._pool_size)
            self._toolbox = Toolbox(
                self.task,
                sandbox,
                tools=_TOOLS,
                limits=self._grading.limits,
                max_observation_chars=self._max_observation_chars,
            )
        self.tool_calls += 1
        result: ToolResult = await self._toolbox.call(ToolCall(name=name, arguments=arguments))
        if result.infra_error is not None:
            self.infra_error = result.infra_error  # the rollout will not be scored
            return "error: the sandbox failed (not your fault); this attempt will not be scored"
        if result.submitted is not None and self.submission is None:
            self.submission = result.submitted
        return result.observation

    async def run_code(self, code: str, stdin: str = "") -> str:
        """Run a program in the sandbox and see its verdict, exit code, stdout and stderr.

        Args:
            code: The program's source, in the task's language.
            stdin: Text for standard input.
        """
        return await self._call("run_code", code=code, stdin=stdin)

    async def run_tests(self, code: str) -> str:
        """Check a complete solution against the task's visible tests; says which fail and why.

        Args:
            code: The complete solution.
        """
        return await self._call("run_tests", code=code)

    async def submit(self, code: str) -> str:
        """Submit the final solution; it is graded on hidden tests. Only the first submission counts.

        Args:
            code: The complete solution (or the final answer, for tasks that ask for one).
        """
        if self.task is not None and self.task.form == "answer":
            return await self._call("submit", answer=code)
        return await self._call("submit", code=code)

    async def get_reward(self) -> float | None:
        """The submission's reward on every test; 0 without one; ``None`` after a sandbox failure."""
        if self.task is None:
            raise RuntimeError("reset() was not called: TRL resets every environment before a rollout")
        if self.infra_error is not None:
            return None
        if self.submission is None:
            self.reward = 0.0
            return self.reward
        sandbox = await _SANDBOXES.get(self._pool_size)
        reward = await Grader(sandbox, self._grading).grade(self.task, self.submission)
        if reward.value is None:
            self.infra_error = reward.error or "the sandbox failed while grading"
        self.reward = reward.value
        return self.reward
