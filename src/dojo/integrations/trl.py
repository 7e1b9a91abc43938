"""The TRL bridge: ``from dojo.integrations.trl import DojoReward, AsyncDojoReward, task_rows``.

- ``DojoReward`` / ``AsyncDojoReward``: dojo graders as TRL reward functions (sync and async,
  picklable, ``None`` on an infrastructure failure); see ``dojo.integrations.trl_rewards``.
- ``task_rows``: dataset rows (``prompt``, ``task``, ``task_id``) for ``GRPOTrainer``.
- ``DojoGRPOTrainer``: ``GRPOTrainer`` with dojo's curriculum, dynamic sampling and failure
  masking, as ``dojo train`` uses it (``dojo.train.grpo``).
"""

from __future__ import annotations

from dojo.integrations.trl_rewards import AsyncDojoReward, DojoReward, completion_text, task_rows
from dojo.train.grpo import CurriculumBatches, DojoGRPOTrainer

__all__ = ["AsyncDojoReward", "CurriculumBatches", "DojoGRPOTrainer", "DojoReward", "completion_text", "task_rows"]
