"""Dynamic sampling and failure masking: which groups a GRPO step trains on."""

from __future__ import annotations

import zlib
from pathlib import Path
from typing import Any

import pytest
import torch

from dojo.errors import DojoError
from dojo.integrations.trl_trainer import CurriculumBatches, groups_to_keep, index_tasks
from dojo.tasks.curriculum import CurriculumSampler
from dojo.tasks.families import generate_tasks
from dojo.tasks.model import Task
from tests.integrations.conftest import grpo_args


def test_informative_groups_are_kept_first_and_failed_ones_never_trained_on() -> None:
    g = 2
    # groups: 0 flat, 1 informative, 2 informative but one sandbox failure, 3 flat, 4 informative
    adv = torch.tensor([0.0, 0.0, 0.7, -0.7, 0.5, -0.5, 0.0, 0.0, -1.0, 1.0])
    failed = [False, False, False, False, False, True, False, False, False, False]
    keep, padding = groups_to_keep(adv, failed, g, keep=3)
    assert keep == [0, 1, 4] and padding == []  # both informative ones, then a flat one; never group 2
    keep, padding = groups_to_keep(adv, failed, g, keep=5)
    assert keep == [0, 1, 2, 3, 4] and padding == [2]  # too few: the failed group only as masked padding


def test_curriculum_batches_repeat_each_task_for_its_group() -> None:
    tasks = generate_tasks("arith", 20, seed=0)
    curriculum = CurriculumSampler(tasks, seed=0)
    it = iter(CurriculumBatches(curriculum, index_tasks(tasks), tasks_per_step=3, group_size=4))
    first = [next(it) for _ in range(12)]
    assert [first[i : i + 4] for i in range(0, 12, 4)] == [[first[i]] * 4 for i in range(0, 12, 4)]
    assert len(set(first)) == 3  # three different tasks in a step


class FlakySandbox:
    """A real sandbox behind a switch, per completion (by a hash of its code): a third of the runs
    fail as infrastructure (a slot that died), a third run the candidate as it is, a third run the
    task's reference solution instead. So one GRPO step has rewards 0, 1 and None in its groups."""

    def __init__(self, reference: str) -> None:
        self.reference = reference.encode()
        self.real: Any = None
        self.failed = 0

    async def run(self, program: Any, limits: Any = None, **kwargs: Any) -> Any:
        from dojo.sandbox import AsyncSandbox, ExecutionResult, InputFile

        if self.real is None:
            self.real = await AsyncSandbox(pool_size=2).start()
        code = next(f.content for f in program.files if f.path == "solution.py")
        kind = zlib.crc32(code) % 3
        if kind == 0:
            self.failed += 1
            return ExecutionResult.from_sandbox_error("slot slot-0 died during the run (test)", "python")
        if kind == 2:
            files = [f if f.path != "solution.py" else InputFile(path=f.path, content=self.reference)
                     for f in program.files]  # fmt: skip
            program = program.model_copy(update={"files": files})
        return await self.real.run(program, limits, **kwargs)


def _flaky_reward(task: Task) -> tuple[Any, FlakySandbox]:
    from dojo.integrations.trl import DojoReward
    from dojo.rewards import Grader, GradingConfig, candidate_code

    reward = DojoReward(grading=GradingConfig(mode="binary", scan=False))
    sandbox = FlakySandbox(candidate_code(task, task.reference or ""))
    reward._grader = Grader(sandbox, GradingConfig(mode="binary", scan=False))  # type: ignore[arg-type]
    return reward, sandbox


def _check_failed_rows_have_no_say(rewards: list[Any], advantages: torch.Tensor, group: int) -> int:
    """Unscorable rows: no advantage; the others' baseline is their own mean (advantages sum to 0
    within a group). How many groups mixed a failure with two different scored rewards."""
    values = [r.value for r in rewards]
    assert len(values) == advantages.numel()
    mixed = 0
    for g in range(0, len(values), group):
        vals, adv = values[g : g + group], advantages[g : g + group]
        scored = [i for i, v in enumerate(vals) if v is not None]
        assert all(adv[i].item() == 0.0 for i, v in enumerate(vals) if v is None)
        assert abs(sum(adv[i].item() for i in scored)) < 1e-4  # the failed rows did not move the baseline
        if len(scored) < len(vals) and len({vals[i] for i in scored}) > 1:
            mixed += 1
    return mixed


def test_stock_and_dojo_grpo_give_sandbox_failures_no_advantage_and_no_baseline(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    """The infrastructure-failure rule with stock TRL: dojo's reward is None when the sandbox failed,
    and TRL leaves such a completion out of its group's baseline and gives it no advantage.
    DojoGRPOTrainer reads the same rows from TRL's reward matrix and never trains on their group."""
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import GRPOTrainer

    from dojo.integrations.trl import DojoGRPOTrainer, task_rows

    [task] = generate_tasks("arith", 1, seed=0)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    tokenizer.padding_side = "left"
    group = 8
    args = grpo_args(tmp_path, max_steps=1, per_device_train_batch_size=32, num_generations=group,
                     max_completion_length=6, temperature=1.5, seed=3)  # fmt: skip
    dataset = Dataset.from_list(task_rows([task]) * 4)
    seen: dict[str, tuple[Any, torch.Tensor]] = {}

    def spying(trainer: type[Any], name: str) -> type[Any]:
        """``trainer`` that keeps each step's rewards and the advantages it trains on."""

        class Spy(trainer):  # type: ignore[misc,valid-type]
            def _generate_and_score_completions(self, inputs: Any) -> Any:
                out = super()._generate_and_score_completions(inputs)
                seen[name] = (list(reward.last_rewards), out["advantages"].clone())
                return out

        return Spy

    reward, sandbox = _flaky_reward(task)
    spying(GRPOTrainer, "stock")(model=str(tiny_model_dir), reward_funcs=[reward], args=args, train_dataset=dataset,
                                 processing_class=tokenizer).train()  # fmt: skip
    reward.close()
    assert sandbox.failed > 0
    assert _check_failed_rows_have_no_say(*seen["stock"], group=group) > 0  # the check was not vacuous

    reward, sandbox = _flaky_reward(task)
    tasks = [task]
    curriculum = CurriculumSampler(tasks, seed=0)
    sampler = CurriculumBatches(curriculum, index_tasks(tasks), tasks_per_step=4, group_size=group)
    trainer = spying(DojoGRPOTrainer, "dojo")(model=str(tiny_model_dir), reward_funcs=[reward], args=args,
                                              train_dataset=dataset, processing_class=tokenizer, sampler=sampler,
                                              keep_groups=2)  # fmt: skip
    trainer.train()
    reward.close()
    rewards, kept = seen["dojo"]
    selection = trainer.dojo_last_selection
    assert selection["groups_generated"] == 4 and kept.numel() == 2 * group
    assert selection["groups_failed"] == sum(
        any(r.value is None for r in rewards[g : g + group]) for g in range(0, len(rewards), group)
    )
    clean = selection["groups_generated"] - selection["groups_failed"]
    assert selection["groups_kept"] == min(2, clean)  # clean groups first; failed ones only as padding
    assert int((kept != 0).sum()) <= group * min(2, clean)  # and padding has no advantage: never trained on
    with pytest.raises(DojoError, match="no rewards were calculated"):
        trainer.unscorable_rows(group)  # each batch's rows are read once, from its own rewards
