"""Expected episode cost per task, learned from history, for longest-first scheduling.

Starting the slow tasks first keeps a batch's tail short (the longest-processing-time rule): a slow
group that starts last is what leaves the accelerator idle at the end of a batch. The estimate is
an exponential moving average of the task's episode wall time; a task never seen gets the mean of
its source and difficulty bucket, else the mean of all tasks, else its difficulty as a tie-break.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from dojo.tasks.model import Task

if TYPE_CHECKING:
    from dojo.rollout.store import TrajectoryStore


def _bucket(task: Task) -> str:
    d = task.metadata.difficulty
    return f"{task.metadata.source}|{'?' if d is None else round(d, 1)}"


class CostModel:
    """Per-task expected seconds per episode. ``state_dict``/``load_state_dict`` persist it as JSON."""

    def __init__(self, alpha: float = 0.5) -> None:
        if not 0.0 < alpha <= 1.0:
            raise ValueError("alpha must be in (0, 1]")
        self.alpha = alpha
        self.tasks: dict[str, float] = {}
        self.buckets: dict[str, tuple[float, int]] = {}

    def observe(self, task: Task, seconds: float) -> None:
        old = self.tasks.get(task.id)
        self.tasks[task.id] = seconds if old is None else (1 - self.alpha) * old + self.alpha * seconds
        total, n = self.buckets.get(_bucket(task), (0.0, 0))
        self.buckets[_bucket(task)] = (total + seconds, n + 1)

    def predict(self, task: Task) -> float:
        if task.id in self.tasks:
            return self.tasks[task.id]
        bucket = self.buckets.get(_bucket(task))
        if bucket is not None:
            return bucket[0] / bucket[1]
        if self.tasks:
            return sum(self.tasks.values()) / len(self.tasks)
        return task.metadata.difficulty or 0.0

    def state_dict(self) -> dict[str, Any]:
        return {"alpha": self.alpha, "tasks": self.tasks, "buckets": {k: list(v) for k, v in self.buckets.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        try:
            self.alpha = float(state["alpha"])
            self.tasks = {str(k): float(v) for k, v in state["tasks"].items()}
            self.buckets = {str(k): (float(v[0]), int(v[1])) for k, v in state["buckets"].items()}
        except (KeyError, TypeError, ValueError, IndexError) as e:
            raise ValueError(f"not a CostModel state: {e}") from e


COSTS_FILE = "_costs.json"  # "_" so that Parquet readers skip it


def load_costs(store: TrajectoryStore) -> tuple[CostModel, str | None]:
    """The cost model a run stored beside its trajectories (empty when there is none), and a
    warning when the stored one could not be read (the run goes on without it)."""
    costs = CostModel()
    path = f"{store.root.rstrip('/')}/{COSTS_FILE}"
    if store.fs.exists(path):
        try:
            with store.fs.open(path, "r") as f:
                costs.load_state_dict(json.load(f))
        except (ValueError, OSError):
            return CostModel(), f"ignoring unreadable {path}"
    return costs, None


def save_costs(store: TrajectoryStore, costs: CostModel) -> None:
    with store.fs.open(f"{store.root.rstrip('/')}/{COSTS_FILE}", "w") as f:
        json.dump(costs.state_dict(), f)
