"""Curriculum: draw tasks by difficulty and by each task's running pass rate.

Learning signal in GRPO-style training comes from groups whose rewards differ: tasks the policy
*sometimes* solves. The sampler keeps, per task, an exponential moving average of its pass rate and
an attempt count, and draws with weight

    w = (p * (1 - p) + floor) * near(difficulty, level)

where ``p`` is the running pass rate (a prior from the task's difficulty until it has been tried),
``floor`` keeps every task reachable, and ``near`` prefers tasks whose difficulty lies near the
current ``level``. The level moves up when the recent mean pass rate is above ``promote_at`` and
down below ``demote_at``. ``state_dict()``/``load_state_dict()`` save and restore everything,
including the random generator, so a resumed run draws exactly what the original would have.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Any

from dojo.tasks.model import Task


class CurriculumSampler:
    def __init__(
        self,
        tasks: Sequence[Task],
        *,
        seed: int = 0,
        level: float = 0.0,
        step: float = 0.1,
        width: float = 0.25,
        promote_at: float = 0.7,
        demote_at: float = 0.2,
        ema: float = 0.3,
        floor: float = 0.02,
        window: int = 64,
    ) -> None:
        if not tasks:
            raise ValueError("a curriculum needs at least one task")
        ids = [t.id for t in tasks]
        if len(set(ids)) != len(ids):
            raise ValueError("task ids must be unique for a curriculum")
        if not 0.0 <= level <= 1.0 or not width > 0.0 or not 0.0 <= demote_at < promote_at <= 1.0:
            raise ValueError("need 0 <= level <= 1, width > 0 and 0 <= demote_at < promote_at <= 1")
        self.tasks = {t.id: t for t in tasks}
        self.level, self.step, self.width = level, step, width
        self.promote_at, self.demote_at, self.ema, self.floor, self.window = promote_at, demote_at, ema, floor, window
        self.pass_rate: dict[str, float] = {}
        self.attempts: dict[str, int] = {}
        self.recent: list[float] = []
        self.rng = random.Random(seed)

    def _difficulty(self, task: Task) -> float:
        return task.difficulty if task.difficulty is not None else 0.5

    def weight(self, task: Task) -> float:
        d = self._difficulty(task)
        # A task not tried yet counts as the most informative kind (p = 0.5). A prior of 1 - d
        # starved the easiest and hardest levels: never drawn, so never measured, so never drawn.
        p = self.pass_rate.get(task.id, 0.5)
        near = math.exp(-(((d - self.level) / self.width) ** 2))
        return (p * (1.0 - p) + self.floor) * near

    def sample(self, n: int) -> list[Task]:
        """``n`` tasks, without repeats while there are enough tasks."""
        if n < 1:
            raise ValueError(f"n must be at least 1, got {n}")
        pool = list(self.tasks.values())
        chosen: list[Task] = []
        while len(chosen) < n:
            batch = pool if len(pool) <= n - len(chosen) else self._weighted(pool, n - len(chosen))
            chosen.extend(batch)
        return chosen[:n]

    def _weighted(self, pool: list[Task], k: int) -> list[Task]:
        # Efraimidis-Spirakis: weighted sampling without replacement.
        keys = [(self.rng.random() ** (1.0 / max(self.weight(t), 1e-12)), i) for i, t in enumerate(pool)]
        keys.sort(reverse=True)
        return [pool[i] for _, i in keys[:k]]

    def update(self, task_id: str, pass_rate: float) -> None:
        """Record one task's result (its group's mean pass rate, 0..1)."""
        if task_id not in self.tasks:
            raise KeyError(f"task {task_id!r} is not in this curriculum")
        if not 0.0 <= pass_rate <= 1.0:
            raise ValueError(f"pass_rate must be in [0, 1], got {pass_rate}")
        old = self.pass_rate.get(task_id)
        self.pass_rate[task_id] = pass_rate if old is None else (1 - self.ema) * old + self.ema * pass_rate
        self.attempts[task_id] = self.attempts.get(task_id, 0) + 1
        self.recent = ([*self.recent, pass_rate])[-self.window :]
        if len(self.recent) >= min(self.window, 8):
            mean = sum(self.recent) / len(self.recent)
            if mean > self.promote_at and self.level < 1.0:
                self.level = min(1.0, self.level + self.step)
                self.recent.clear()
            elif mean < self.demote_at and self.level > 0.0:
                self.level = max(0.0, self.level - self.step)
                self.recent.clear()

    def state_dict(self) -> dict[str, Any]:
        version, internal, gauss = self.rng.getstate()
        return {
            "level": self.level,
            "pass_rate": dict(self.pass_rate),
            "attempts": dict(self.attempts),
            "recent": list(self.recent),
            "rng": [version, list(internal), gauss],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        unknown = set(state.get("pass_rate", {})) - set(self.tasks)
        if unknown:
            raise ValueError(
                f"curriculum state names {len(unknown)} task(s) not in this task set, e.g. {next(iter(unknown))!r}"
            )
        self.level = float(state["level"])
        self.pass_rate = {k: float(v) for k, v in state["pass_rate"].items()}
        self.attempts = {k: int(v) for k, v in state["attempts"].items()}
        self.recent = [float(x) for x in state["recent"]]
        version, internal, gauss = state["rng"]
        self.rng.setstate((version, tuple(internal), gauss))
