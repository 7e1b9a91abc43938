"""What verl needs from dojo without importing verl: a reward function and the dataset.

- ``compute_score(data_source, solution_str, ground_truth, extra_info=None, **kw)``: verl's custom
  reward function signature (``custom_reward_function.path`` / ``.name``), backed by dojo's grader
  and a warm sandbox pool per worker process. ``ground_truth`` is the task as JSON, which the
  export puts in ``reward_model.ground_truth``; hidden tests never reach the prompt.
- ``verl_rows`` / ``export_verl_parquet``: a task set in verl's Parquet row schema (``data_source``,
  ``prompt`` as chat messages, ``ability``, ``reward_model``, ``extra_info`` with ``index``,
  ``tools_kwargs`` for each ``DojoSandboxTool`` and the task id), plus ``agent_name`` when given.

An infrastructure failure is never a 0: ``compute_score`` retries the sandbox, then raises
``RewardUnavailable``, so the step fails loudly instead of training on a wrong reward.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from dojo.agent.tool_calls import parse_tool_calls
from dojo.agent.tools import submission_text
from dojo.errors import DojoError
from dojo.integrations.trl_rewards import DojoReward
from dojo.rewards.config import DEFAULT_GRADING, GradingConfig
from dojo.tasks.model import Task

RETRIES = 3
SANDBOX_TOOLS = ("run_code", "run_tests", "submit")  # DojoSandboxTool names, by action


class RewardUnavailable(DojoError, RuntimeError):
    """The sandbox failed on every try: no reward can be given (and none is made up)."""


_rewards: dict[str, DojoReward] = {}  # one warm grader per reward mode, per worker process
_rewards_lock = threading.Lock()


def _grader(mode: str) -> DojoReward:
    if mode not in ("default", "fraction", "binary"):
        raise ValueError(f"reward_mode must be default, fraction or binary, got {mode!r}")
    with _rewards_lock:
        if mode not in _rewards:
            _rewards[mode] = DojoReward(grading=GradingConfig(mode=mode))
        return _rewards[mode]


def close_graders() -> None:
    """Close ``compute_score``'s warm graders (their sandboxes and loop threads); a later call makes
    new ones. For a worker that is done scoring, and for tests."""
    with _rewards_lock:
        rewards = list(_rewards.values())
        _rewards.clear()
    for reward in rewards:
        reward.close()


def load_task(ground_truth: Any) -> Task:
    """A task from a Parquet row's ``ground_truth`` or ``tools_kwargs`` (JSON, a dict, or a Task)."""
    if isinstance(ground_truth, Task):
        return ground_truth
    if isinstance(ground_truth, dict):
        return Task.model_validate(ground_truth)
    if isinstance(ground_truth, str | bytes):
        try:
            return Task.model_validate_json(ground_truth)
        except ValueError as e:
            raise ValueError(
                "ground_truth is not a dojo task (JSON): export the dataset with "
                f"dojo.integrations.verl.export_verl_parquet; {str(e).splitlines()[0]}"
            ) from e
    raise TypeError(f"ground_truth must be a dojo task as JSON, got {type(ground_truth).__name__}")


TOOL_RESPONSE = re.compile(r"<tool_response>.*?(?:</tool_response>|$)", re.DOTALL)


def response_answer(task: Task, response: str) -> str:
    """The answer a response gives, from the model's own text: what tools wrote (each
    ``<tool_response>``) left out, and where the model called ``submit`` (verl's tool agent loop
    with dojo's sandbox tools), its first submission as the tool took it. The whole decoded
    response had been graded: a submitted right answer without a fence was a compile error (0), and
    a code block that only a tool's output held scored 1.0."""
    own = TOOL_RESPONSE.sub("", response)
    if task.form != "repo":
        for call in parse_tool_calls(own):
            if call.name == "submit" and (submitted := submission_text(task, call)) is not None:
                return submitted
    return own


def compute_score(
    data_source: str, solution_str: str, ground_truth: Any, extra_info: dict[str, Any] | None = None, **kwargs: Any
) -> dict[str, Any]:
    """The reward of one response: ``{"score": reward, "pass_rate": ..., "verdict": ...}`` (verl
    logs the extra keys). The reward mode comes from ``extra_info["reward_mode"]`` (default: the
    one of ``GradingConfig``, 1 / 0.5 / 0)."""
    task = load_task(ground_truth)
    grader = _grader(str((extra_info or {}).get("reward_mode", DEFAULT_GRADING.mode)))
    answer = response_answer(task, solution_str)
    error = ""
    for _ in range(RETRIES):
        (reward,) = grader.grade([task], [answer])
        if reward.value is not None:
            total = max(1, reward.total)
            return {"score": reward.value, "pass_rate": reward.passed / total, "verdict": reward.verdict}
        error = reward.error or "sandbox error"
    raise RewardUnavailable(f"task {task.id!r}: the sandbox failed {RETRIES} times ({error}); no reward given")


def verl_rows(
    tasks: Iterable[Task],
    *,
    split: str = "train",
    agent_name: str | None = None,
    reward_mode: str = DEFAULT_GRADING.mode,
) -> list[dict[str, Any]]:
    """verl's row schema for each task (see the module docstring)."""
    rows = []
    for i, t in enumerate(tasks):
        task_json = t.model_dump_json()
        row: dict[str, Any] = {
            "data_source": f"dojo/{t.metadata.source or 'tasks'}",
            "prompt": [dict(m) for m in t.messages()],
            "ability": "code" if t.form != "answer" else "reasoning",
            "reward_model": {"style": "rule", "ground_truth": task_json},
            "extra_info": {
                "index": i,
                "split": split,
                "task_id": t.id,
                "reward_mode": reward_mode,
                "tools_kwargs": {name: {"create_kwargs": {"task": task_json}} for name in SANDBOX_TOOLS},
            },
        }
        if agent_name is not None:
            row["agent_name"] = agent_name
        rows.append(row)
    return rows


def export_verl_parquet(tasks: Iterable[Task], path: str | Path, **kwargs: Any) -> int:
    """Write ``verl_rows(tasks, **kwargs)`` to a Parquet file; returns the number of rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = verl_rows(tasks, **kwargs)
    if not rows:
        raise ValueError("no tasks to export")
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), out)
    return len(rows)
