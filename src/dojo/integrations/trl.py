"""The TRL bridge: ``from dojo.integrations.trl import DojoReward, AsyncDojoReward, task_rows``.

- ``DojoReward`` / ``AsyncDojoReward``: dojo graders as TRL reward functions (sync and async,
  picklable, ``None`` on an infrastructure failure); see ``dojo.integrations.trl_rewards``.
- ``DojoToolEnv``: a dojo task as a tool-calling environment (``environment_factory``);
  see ``dojo.integrations.trl_env``.
- ``DojoRollout`` + ``episode_reward``: dojo's multi-turn feedback episodes as a ``rollout_func``,
  with ``env_mask`` on the feedback tokens; see ``dojo.integrations.trl_rollout``.
- ``task_rows``: dataset rows (``prompt``, ``task``, ``task_id``) for ``GRPOTrainer``.
- ``close_trainer``: closes the sandboxes dojo started under a trainer, and TRL's async loop,
  once training is over (``dojo.integrations.trl_close``).
- ``DojoGRPOTrainer``: ``GRPOTrainer`` with dojo's curriculum, dynamic sampling and failure
  masking, as ``dojo train`` uses it (``dojo.integrations.trl_trainer``).
"""

from __future__ import annotations

from dojo.integrations.trl_close import close_trainer
from dojo.integrations.trl_env import DojoToolEnv
from dojo.integrations.trl_rewards import AsyncDojoReward, DojoReward, completion_text, task_rows
from dojo.integrations.trl_rollout import DojoRollout, episode_reward
from dojo.integrations.trl_trainer import CurriculumBatches, DojoGRPOTrainer

__all__ = [
    "AsyncDojoReward", "CurriculumBatches", "DojoGRPOTrainer", "DojoReward", "DojoRollout", "DojoToolEnv",
    "close_trainer", "completion_text", "episode_reward", "task_rows",
]  # fmt: skip
