"""dojo rewards as TRL reward functions: floats from the sandbox, None on infrastructure failure,
picklable, and driven by a real ``trl.GRPOTrainer`` on the tiny model."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
from datasets import Dataset

from dojo.integrations.trl import AsyncDojoReward, DojoReward, close_trainer, task_rows
from dojo.rewards import GradingConfig
from dojo.tasks.families import generate_tasks
from tests.integrations.conftest import DeadSandbox, grpo_args

TASKS = generate_tasks("arith", 4, seed=0)


def test_sync_reward_grades_in_the_sandbox_and_survives_pickling() -> None:
    reward = DojoReward(grading=GradingConfig(mode="binary"))
    rows = task_rows(TASKS[:2])
    completions = [TASKS[0].reference or "", "x * 1000"]
    columns = {"task": [r["task"] for r in rows]}
    assert reward([r["prompt"] for r in rows], completions, **columns) == [1.0, 0.0]
    clone = pickle.loads(pickle.dumps(reward))  # no sandbox travels; the clone starts its own
    assert clone([r["prompt"] for r in rows], completions, **columns) == [1.0, 0.0]
    by_id = DojoReward(TASKS, grading=GradingConfig(mode="binary"))
    assert by_id(["p"], [[{"role": "assistant", "content": completions[0]}]], task_id=[TASKS[0].id]) == [1.0]
    for r in (reward, clone, by_id):
        r.close()


def test_rows_without_a_task_are_a_clear_error() -> None:
    reward = DojoReward()
    with pytest.raises(ValueError, match="needs a `task` column"):
        reward(["p"], ["x"])
    with pytest.raises(KeyError, match="not among the 0 tasks"):
        reward(["p"], ["x"], task_id=["nope"])


async def test_async_reward_is_none_when_the_sandbox_fails() -> None:
    from dojo.rewards import Grader

    reward = AsyncDojoReward(grading=GradingConfig(mode="binary"))
    reward._grader = Grader(DeadSandbox())  # type: ignore[arg-type]
    rows = task_rows(TASKS[:1])
    assert await reward([rows[0]["prompt"]], [TASKS[0].reference], task=[rows[0]["task"]]) == [None]
    assert pickle.loads(pickle.dumps(reward))._grader is None


def test_a_real_grpo_trainer_trains_on_dojo_rewards(tiny_model_dir: Path, tmp_path: Path) -> None:
    from transformers import AutoTokenizer
    from trl import GRPOTrainer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    tokenizer.padding_side = "left"
    sync_reward, async_reward = (
        DojoReward(grading=GradingConfig(mode="fraction")),
        AsyncDojoReward(grading=GradingConfig(mode="binary")),
    )
    args = grpo_args(tmp_path, max_steps=2, max_completion_length=8)
    trainer = GRPOTrainer(
        model=str(tiny_model_dir), reward_funcs=[sync_reward, async_reward], args=args,
        train_dataset=Dataset.from_list(task_rows(TASKS)), processing_class=tokenizer,
    )  # fmt: skip
    try:
        trainer.train()
    finally:
        close_trainer(trainer)  # both rewards' sandboxes, and TRL's async loop
    logged = [log for log in trainer.state.log_history if "reward" in log]
    assert len(logged) == 2 and all(0.0 <= log["reward"] <= 2.0 for log in logged)
    assert "rewards/dojo/mean" in logged[0]
    assert len(sync_reward.last_rewards) == 4  # every completion of the step went through the grader
    assert async_reward._sandbox is None and not trainer.async_loop_thread.is_alive()
    assert trainer.async_loop.is_closed()
    close_trainer(trainer)  # twice is harmless
