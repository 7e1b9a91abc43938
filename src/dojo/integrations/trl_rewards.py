"""dojo graders as TRL reward functions.

TRL calls a reward function as ``f(prompts, completions, completion_ids=None, **columns)``, where
``columns`` are the dataset's other columns, one value per completion, and expects one float per
completion, or ``None`` where the reward does not apply. dojo returns ``None`` when the sandbox
failed (an infrastructure failure is never a 0); TRL then leaves that completion out of the sum.

Each row names its task through a column: ``task`` (the task as JSON, see ``task_rows``) or
``task_id`` (looked up in the ``tasks`` given to the constructor). ``DojoReward`` is synchronous
and runs its sandbox on a private event loop thread; ``AsyncDojoReward`` is a coroutine function
that TRL runs on its own loop. Both are picklable: the sandbox is started lazily in the process
that calls them and never travels.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from dojo.integrations.event_loops import BackgroundLoop
from dojo.rewards import Grader, GradingConfig, Reward
from dojo.rewards.config import DEFAULT_GRADING
from dojo.sandbox import AsyncSandbox
from dojo.tasks.model import Task


def task_rows(tasks: Iterable[Task], *, chat: bool = False) -> list[dict[str, Any]]:
    """Dataset rows for TRL: ``prompt`` (text, or chat messages with ``chat=True``), ``task`` (JSON)
    and ``task_id``. Hidden tests ride in ``task``, which the model never sees."""
    rows = []
    for t in tasks:
        prompt: Any = t.messages() if chat else t.prompt_text()
        rows.append({"prompt": prompt, "task": t.model_dump_json(), "task_id": t.id})
    return rows


def completion_text(completion: Any) -> str:
    """TRL passes text completions as strings and chat completions as a list of messages."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list):
        return "".join(str(m.get("content") or "") for m in completion if isinstance(m, dict))
    raise TypeError(f"a completion must be a string or a list of chat messages, got {type(completion).__name__}")


class _RewardBase:
    __name__ = "dojo"

    def __init__(
        self,
        tasks: Iterable[Task] = (),
        *,
        grading: GradingConfig = DEFAULT_GRADING,
        pool_size: int = 2,
    ) -> None:
        if pool_size < 1:
            raise ValueError(f"pool_size must be at least 1, got {pool_size}")
        self.tasks = {t.id: t for t in tasks}
        self.grading = grading
        self.pool_size = pool_size
        self.last_rewards: list[Reward] = []
        self._sandbox: AsyncSandbox | None = None
        self._grader: Grader | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        for key in ("_sandbox", "_grader", "_loop"):
            state.pop(key, None)
        state["last_rewards"] = []
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._sandbox = None
        self._grader = None
        self._init_runtime()

    def _init_runtime(self) -> None:
        pass

    def _resolve(self, n: int, task: Sequence[Any] | None, task_id: Sequence[Any] | None) -> list[Task]:
        if task is not None:
            if len(task) != n:
                raise ValueError(f"the task column has {len(task)} values for {n} completions")
            return [t if isinstance(t, Task) else Task.model_validate_json(t) for t in task]
        if task_id is not None:
            if len(task_id) != n:
                raise ValueError(f"the task_id column has {len(task_id)} values for {n} completions")
            missing = [i for i in task_id if i not in self.tasks]
            if missing:
                raise KeyError(
                    f"task {missing[0]!r} is not among the {len(self.tasks)} tasks this reward was built with; "
                    "pass them as DojoReward(tasks) or add a `task` column (dojo.integrations.trl.task_rows)"
                )
            return [self.tasks[i] for i in task_id]
        raise ValueError(
            "the dataset needs a `task` column (task JSON) or a `task_id` column; build rows with "
            "dojo.integrations.trl.task_rows(tasks)"
        )

    async def _grade(self, tasks: list[Task], texts: list[str]) -> list[Reward]:
        if self._grader is None:
            self._sandbox = await AsyncSandbox(pool_size=self.pool_size).start()
            self._grader = Grader(self._sandbox, self.grading)
        rewards = await self._grader.grade_many(list(zip(tasks, texts, strict=True)))
        self.last_rewards = rewards
        return rewards

    def _inputs(
        self, prompts: Sequence[Any], completions: Sequence[Any], columns: dict[str, Any]
    ) -> tuple[list[Task], list[str]]:
        if len(prompts) != len(completions):
            raise ValueError(f"{len(prompts)} prompts for {len(completions)} completions")
        tasks = self._resolve(len(completions), columns.get("task"), columns.get("task_id"))
        return tasks, [completion_text(c) for c in completions]


class DojoReward(_RewardBase):
    """A synchronous TRL reward function backed by a dojo ``Grader`` and a warm sandbox pool."""

    def _init_runtime(self) -> None:
        self._loop = BackgroundLoop("dojo-reward")

    def __init__(self, tasks: Iterable[Task] = (), **kwargs: Any) -> None:
        super().__init__(tasks, **kwargs)
        self._init_runtime()

    def __call__(
        self, prompts: Sequence[Any], completions: Sequence[Any], completion_ids: Any = None, **columns: Any
    ) -> list[float | None]:
        tasks, texts = self._inputs(prompts, completions, columns)
        return [r.value for r in self._loop.run(self._grade(tasks, texts))]

    def grade(self, tasks: list[Task], texts: list[str]) -> list[Reward]:
        """The full ``Reward`` objects (verdicts, cases) rather than TRL's floats."""
        return self._loop.run(self._grade(tasks, texts))

    def close(self) -> None:
        if self._loop.started and self._sandbox is not None:
            self._loop.run(self._sandbox.close())
        self._loop.stop()
        self._sandbox = self._grader = None


class AsyncDojoReward(_RewardBase):
    """The same as ``DojoReward`` for TRL's asynchronous path: ``await reward(prompts, completions, ...)``.
    The sandbox belongs to the event loop of the first call (TRL keeps one loop for all of them)."""

    async def __call__(
        self, prompts: Sequence[Any], completions: Sequence[Any], completion_ids: Any = None, **columns: Any
    ) -> list[float | None]:
        tasks, texts = self._inputs(prompts, completions, columns)
        return [r.value for r in await self._grade(tasks, texts)]

    async def aclose(self) -> None:
        if self._sandbox is not None:
            await self._sandbox.close()
        self._sandbox = self._grader = None
