"""Runs written the way ``dojo train`` and ``dojo rollout`` write them (``TrajectoryStore``, and
``metrics.csv`` with the training callback's columns), with episodes whose outcome the test decides."""

from __future__ import annotations

import csv
import time
import uuid
from pathlib import Path

from dojo.agent.episode import Episode, TurnRecord
from dojo.agent.policy import Completion, ToolCall
from dojo.agent.tools import ToolResult
from dojo.rewards.outcome import CaseOutcome, Reward
from dojo.rollout.store import TrajectoryStore
from dojo.tasks.model import Task, TaskMetadata, TestCase
from dojo.train.callbacks import METRIC_COLUMNS


def task(task_id: str, difficulty: float = 1.0) -> Task:
    return Task(
        id=task_id, form="function", prompt="def f(x):\n", entry_point="f",
        tests=[TestCase(args=[1], expected=2)], metadata=TaskMetadata(source="test", difficulty=difficulty),
    )  # fmt: skip


def episode(task_id: str, group: str, index: int, *, passed: bool, hack: bool = False, status: str = "answered",
            wall: float = 1.0, started: float | None = None) -> Episode:  # fmt: skip
    """A two-turn episode: a ``run_code`` tool call and its observation, then the answer, graded."""
    call = ToolCall(id=f"call-{index}", name="run_code", arguments={"code": "print(f(1))"})
    first = Completion(text="Let me try it.", tool_calls=[call], completion_tokens=12)
    answer = "def f(x):\n    return 2 * x\n" if passed else "def f(x):\n    return x\n"
    result = ToolResult(call=call, observation="2\n", verdict="Accepted", exit_code=0)
    turns = [
        TurnRecord(
            index=0, completion=first, policy_seconds=0.3 * wall, tool_seconds=0.2 * wall, tool_results=[result]
        ),
        TurnRecord(index=1, completion=Completion(text=answer, completion_tokens=20), policy_seconds=0.3 * wall),
    ]
    if status in ("infra_error", "policy_error"):
        reward = None
    elif hack:
        reward = Reward(value=0.0, verdict="hack", total=1, flags=["hack:exit_before_checks"],
                        cases=[CaseOutcome(index=0, passed=False, detail="exited before the checks")])  # fmt: skip
    else:
        case = CaseOutcome(index=0, passed=passed, detail="" if passed else "f(1) == 1")
        reward = Reward(value=float(passed), verdict="pass" if passed else "fail", passed=int(passed), total=1,
                        cases=[case])  # fmt: skip
    return Episode(
        episode_id=uuid.uuid4().hex, task_id=task_id, group_id=group, sample_index=index, status=status,  # type: ignore[arg-type]
        messages=[{"role": "user", "content": "Write f."}, {"role": "assistant", "content": answer}],
        turns=turns, final=answer, reward=reward, started_at=started if started is not None else time.time() - wall,
        wall_seconds=wall, policy_seconds=0.6 * wall, tool_seconds=0.2 * wall, grade_seconds=0.1 * wall,
        prompt_tokens=30, completion_tokens=32, turn_rewards=[{"total": 0.1}, {"total": 0.9 if passed else 0.0}],
    )  # fmt: skip


def write_groups(store: TrajectoryStore, groups: int, size: int = 4, *, pass_every: int = 2, hack: bool = False,
                 status: str = "answered", difficulty: float = 1.0, wall: float = 1.0) -> list[Episode]:  # fmt: skip
    """``groups`` groups of ``size`` episodes in one shard; every ``pass_every``-th episode passes."""
    written: list[tuple[Task, list[Episode]]] = []
    for g in range(groups):
        group = uuid.uuid4().hex[:12]
        t = task(f"task-{g % 3}", difficulty)
        eps = [episode(t.id, group, i, passed=i % pass_every == 0, hack=hack, status=status, wall=wall + 0.01 * i)
               for i in range(size)]  # fmt: skip
        written.append((t, eps))
    store.write_groups(written)
    return [ep for _, eps in written for ep in eps]


def write_metrics(run_dir: Path, steps: int) -> None:
    """``metrics.csv`` as ``dojo train`` writes it, ``steps`` rows (the reward climbs)."""
    path = run_dir / "metrics.csv"
    new = not path.exists()
    start = sum(1 for _ in path.open()) - 1 if not new else 0
    with path.open("a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=METRIC_COLUMNS, extrasaction="ignore")
        if new:
            writer.writeheader()
        for step in range(start + 1, start + steps + 1):
            row = {"step": step, "reward": 0.1 * step, "pass_rate": 0.05 * step, "curriculum_level": 1 + step // 5}
            writer.writerow({**row, "step_time": 2.0, "wall_seconds": 2.0 * step})
