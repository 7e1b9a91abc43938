"""Rollouts at scale: the asynchronous scheduler and the trajectory store.

from dojo.rollout import RolloutScheduler, TrajectoryStore
async for group in RolloutScheduler(policy, grader).run(tasks):
    store.write_groups([(group.task, group.episodes)])
"""

from dojo.rollout.costs import CostModel
from dojo.rollout.scheduler import Group, RolloutConfig, RolloutScheduler, RolloutStats
from dojo.rollout.store import SCHEMA, TrajectoryStore, episode_row
from dojo.rollout.summary import pass_at_k, summarise

__all__ = [
    "SCHEMA",
    "CostModel",
    "Group",
    "RolloutConfig",
    "RolloutScheduler",
    "RolloutStats",
    "TrajectoryStore",
    "episode_row",
    "pass_at_k",
    "summarise",
]
