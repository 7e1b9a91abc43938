"""``DojoToolEnv``: a dojo task as a TRL tool-calling environment. Its tools run in the sandbox,
the reward comes from dojo's grader (None after a sandbox failure), and a real ``GRPOTrainer``
drives it with ``environment_factory``."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from datasets import Dataset

from dojo.integrations import trl_env
from dojo.integrations.trl import DojoToolEnv, close_trainer, task_rows
from dojo.rewards import GradingConfig
from tests.integrations.conftest import DeadSandbox, arith_tasks, grpo_args

PLUS_ONE, TIMES_TWO = arith_tasks(["x + 1", "x * 2"])


def _row(task: Any) -> dict[str, Any]:
    return task_rows([task], chat=True)[0]


async def test_tools_run_in_the_sandbox_and_the_submission_is_graded_on_hidden_tests() -> None:
    env = DojoToolEnv(grading=GradingConfig(mode="binary"), pool_size=1)
    assert env.reset(**_row(PLUS_ONE)) is None  # the prompt already shows the task
    assert "stdout:\n42" in await env.run_code("print(6 * 7)")
    failing = await env.run_tests("x * 3")
    assert "f(1)" in failing or "fail" in failing.lower()
    assert await env.get_reward() == 0.0  # nothing submitted yet: the model did not answer
    assert await env.submit("x + 1") == "submitted"
    await env.submit("x * 1000")  # only the first submission counts
    assert await env.get_reward() == 1.0
    env.reset(**_row(TIMES_TWO))
    await env.submit("x + 1")
    assert await env.get_reward() == 0.0 and env.tool_calls == 1
    await DojoToolEnv.close_sandboxes()


async def test_a_sandbox_failure_is_no_reward_not_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    async def dead(pool_size: int) -> Any:
        return DeadSandbox()

    monkeypatch.setattr(trl_env._SANDBOXES, "get", dead)
    env = DojoToolEnv()
    env.reset(**_row(PLUS_ONE))
    assert "sandbox failed" in await env.run_code("print(1)")
    await env.submit("x + 1")
    assert await env.get_reward() is None
    env.reset(**_row(PLUS_ONE))  # a new rollout starts clean; its grading fails too
    await env.submit("x + 1")
    assert await env.get_reward() is None


def test_bad_rows_and_settings_are_clear_errors() -> None:
    env = DojoToolEnv()
    with pytest.raises(ValueError, match="no `task` column"):
        env.reset(prompt="hi")
    with pytest.raises(RuntimeError, match="reset"):
        asyncio.run(env.get_reward())
    with pytest.raises(ValueError, match="pool_size"):
        DojoToolEnv.factory(pool_size=0)


def test_a_real_grpo_trainer_runs_tool_calling_episodes(submitting_model_dir: Path, tmp_path: Path) -> None:
    from transformers import AutoTokenizer
    from trl import GRPOTrainer

    made: list[DojoToolEnv] = []

    def factory() -> DojoToolEnv:
        env = DojoToolEnv(grading=GradingConfig(mode="binary"), pool_size=1)
        made.append(env)
        return env

    tokenizer = AutoTokenizer.from_pretrained(submitting_model_dir)
    tokenizer.padding_side = "left"
    args = grpo_args(
        tmp_path, per_device_train_batch_size=8, num_generations=4, max_completion_length=96,
        max_tool_calling_iterations=1, seed=0,
    )  # fmt: skip
    trainer = GRPOTrainer(
        model=str(submitting_model_dir), args=args, environment_factory=factory, processing_class=tokenizer,
        train_dataset=Dataset.from_list(task_rows([PLUS_ONE, TIMES_TWO], chat=True)),
    )  # fmt: skip
    try:
        trainer.train()
    finally:
        close_trainer(trainer)  # the environments' sandbox pool on TRL's loop, and the loop
    log = next(entry for entry in trainer.state.log_history if "reward" in entry)
    assert log["tools/call_frequency"] > 0
    used = [e for e in made if e.task is not None]
    submitted = [e for e in used if e.submission is not None]
    assert submitted, "the model called submit in no rollout"
    for e in submitted:  # each reward is the sandbox's verdict on that rollout's own task
        assert e.reward == (1.0 if e.task is not None and e.task.reference == "x + 1" else 0.0)
    assert any(e.reward == 1.0 for e in submitted) and any(e.reward == 0.0 for e in submitted)
    assert log["rewards/DojoToolEnv/mean"] == pytest.approx(sum(e.reward or 0.0 for e in used) / len(used))
