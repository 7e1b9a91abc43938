"""TRL's ``GRPOTrainer`` with dojo's sampling: a curriculum picks the tasks, dynamic sampling keeps
the informative groups, and a group the sandbox failed on is never trained on.

- ``CurriculumBatches`` is the trainer's sampler: each step it asks the ``CurriculumSampler`` for
  ``ceil(prompts_per_step * oversample)`` tasks and yields each one ``group_size`` times in a row
  (the order TRL's ``RepeatSampler`` uses). The curriculum learns from every graded group through
  ``record_group``, so the next draws follow the policy's pass rate.
- ``DojoGRPOTrainer._generate_and_score_completions`` generates and scores the oversampled batch
  (TRL computes group-normalised advantages), then keeps ``prompts_per_step`` groups: those whose
  rewards differ first (DAPO's dynamic sampling), then the rest. Groups with an unscorable
  completion (every reward ``None``: an infrastructure failure) are dropped, or kept with their
  loss mask zeroed when there are not enough others, so they contribute nothing to the gradient.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import torch
from torch.utils.data import Sampler
from trl.trainer.grpo_trainer import GRPOTrainer

from dojo.errors import DojoError
from dojo.tasks.curriculum import CurriculumSampler
from dojo.tasks.model import Task


class CurriculumBatches(Sampler[int]):
    """Endless dataset indices, ``group_size`` copies of each drawn task in a row."""

    def __init__(
        self, curriculum: CurriculumSampler, index_of: dict[str, int], tasks_per_step: int, group_size: int
    ) -> None:
        self.curriculum = curriculum
        self.index_of = index_of
        self.tasks_per_step = tasks_per_step
        self.group_size = group_size

    def __iter__(self) -> Iterator[int]:
        while True:
            for task in self.curriculum.sample(self.tasks_per_step):
                idx = self.index_of[task.id]
                for _ in range(self.group_size):
                    yield idx

    def __len__(self) -> int:  # the trainer runs by max_steps; this only has to be large
        return 1 << 40


def groups_to_keep(
    advantages: torch.Tensor, failed: list[bool], group_size: int, keep: int
) -> tuple[list[int], list[int]]:
    """Which groups to train on, and which of those only as padding (loss masked).

    Informative groups (any non-zero advantage) come first, then uninformative ones, then, only if
    there are still too few, failed ones (masked)."""
    n = advantages.numel() // group_size
    adv = advantages.view(n, group_size)
    is_failed = [any(failed[g * group_size : (g + 1) * group_size]) for g in range(n)]
    is_informative = [bool((adv[g] != 0).any()) for g in range(n)]
    ok = [g for g in range(n) if not is_failed[g]]
    bad = [g for g in range(n) if is_failed[g]]
    informative = [g for g in ok if is_informative[g]]
    flat = [g for g in ok if not is_informative[g]]
    chosen = (informative + flat)[:keep]
    padding = bad[: keep - len(chosen)]
    return sorted(chosen + padding), padding


class DojoGRPOTrainer(GRPOTrainer):
    """``GRPOTrainer`` plus a curriculum sampler, dynamic sampling and infrastructure-failure masking.

    A completion is *unscorable* when every reward function returned ``None`` for it (dojo's
    rewards do when the sandbox failed). TRL itself (>= 1.16) leaves such completions out of their
    group's baseline and gives them no advantage. dojo goes one step further, so that a group the
    sandbox failed on does not even take a place in the step: the unscorable rows come from TRL's
    own reward matrix (``_calculate_rewards``), not from a side channel, and a mismatch between
    them and the batch raises. ``keep_groups`` is ``prompts_per_step``.
    """

    def __init__(
        self,
        *args: Any,
        sampler: CurriculumBatches,
        keep_groups: int,
        dojo_metrics: Any = None,
        **kwargs: Any,
    ) -> None:
        self._dojo_metrics = dojo_metrics
        self._dojo_sampler = sampler
        self._keep_groups = keep_groups
        self._unscorable: torch.Tensor | None = None
        self.dojo_last_selection: dict[str, int] = {}
        super().__init__(*args, **kwargs)

    def _calculate_rewards(self, inputs: Any, prompts: Any, completions: Any, completion_ids_list: Any) -> Any:
        rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        self._unscorable = torch.isnan(rewards_per_func).all(dim=1)  # every process's rows, as TRL marks them
        return rewards_per_func

    def unscorable_rows(self, rows: int) -> list[bool]:
        """This process's rows of the batch just scored: whether each is unscorable. Raises when
        the reward matrix and the batch disagree (never silently trains on a failed row)."""
        if self._unscorable is None:
            raise DojoError("no rewards were calculated for this batch")
        start = self.accelerator.process_index * rows
        local = self._unscorable[start : start + rows]
        self._unscorable = None
        if local.numel() != rows:
            raise DojoError(f"the reward matrix has {local.numel()} rows for this process, the batch {rows}")
        return [bool(x) for x in local.tolist()]

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        if (
            "loss" in logs and self.model is not None and self.model.training
        ):  # a training step's log: add what dojo measured
            logs.update(self.dojo_last_selection)
            if self._dojo_metrics is not None:
                logs.update({k: v for k, v in self._dojo_metrics().items() if v is not None})
        super().log(logs, start_time)

    def _get_train_sampler(self, dataset: Any = None) -> Sampler[int]:
        return self._dojo_sampler

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = super()._generate_and_score_completions(inputs)
        g = int(self.num_generations or 1)
        rows = out["completion_ids"].shape[0]
        failed = self.unscorable_rows(rows)
        keep, padding = groups_to_keep(out["advantages"], failed, g, self._keep_groups)
        index = torch.tensor([grp * g + i for grp in keep for i in range(g)], device=out["completion_ids"].device)
        selected: dict[str, Any] = {}
        for key, value in out.items():
            if isinstance(value, torch.Tensor) and value.dim() > 0 and value.shape[0] == rows:
                selected[key] = value.index_select(0, index)
            else:
                selected[key] = value
        if padding:
            pad = set(padding)
            masked = torch.tensor([grp in pad for grp in keep for _ in range(g)], device=index.device)
            selected["completion_mask"] = selected["completion_mask"] * (~masked).unsqueeze(1).int()
            selected["advantages"] = selected["advantages"].masked_fill(masked, 0.0)
        loss_mask = selected["completion_mask"]
        if selected.get("tool_mask") is not None:
            loss_mask = loss_mask * selected["tool_mask"]
        selected["num_items_in_batch"] = loss_mask.sum().clamp(min=1)
        n_groups = rows // g
        adv = out["advantages"].view(n_groups, g)
        informative = sum(1 for grp in range(n_groups) if bool((adv[grp] != 0).any()))
        self.dojo_last_selection = {
            "groups_generated": n_groups,
            "groups_informative": informative,
            "groups_failed": sum(1 for grp in range(n_groups) if any(failed[grp * g : (grp + 1) * g])),
            "groups_kept": len(keep) - len(padding),
        }
        return selected


def tasks_per_step(prompts_per_step: int, oversample: float) -> int:
    return max(prompts_per_step, math.ceil(prompts_per_step * oversample))


def index_tasks(tasks: list[Task]) -> dict[str, int]:
    return {t.id: i for i, t in enumerate(tasks)}
