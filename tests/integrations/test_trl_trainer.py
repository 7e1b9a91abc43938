"""Dynamic sampling and failure masking: which groups a GRPO step trains on."""

from __future__ import annotations

import torch

from dojo.integrations.trl_trainer import CurriculumBatches, groups_to_keep, index_tasks
from dojo.tasks.curriculum import CurriculumSampler
from dojo.tasks.families import generate_tasks


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
