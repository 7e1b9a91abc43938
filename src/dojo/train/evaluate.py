"""Held-out evaluation of a local model: the same episodes training runs, on tasks it never trains on.

Episodes run through ``DojoRollout.run_groups`` (the rollout scheduler, the episode mode of the run,
dojo's graders) with the model as an in-process ``HFPolicy``. ``mean_reward`` is the reward GRPO
maximises (episodes sampled at the training temperature, ``samples`` per task); ``pass_rate`` is
the share of those that pass every test; ``greedy_pass`` is the pass rate of one greedy episode per
task. For multi-turn episodes, ``pass_by_turn[t]`` is the share of sampled episodes that passed
within ``t + 1`` replies, and ``fixed_later`` the share that passed on their second reply or later
(the failures the feedback fixed). An episode whose prompt alone does not fit the model's context
(``prompt_too_long``: nothing sampled) counts in ``prompts_too_long``, not as an infrastructure error.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from dojo.agent.hf_policy import HFPolicy
from dojo.agent.policy import SamplingParams
from dojo.integrations.trl_rollout import DojoRollout
from dojo.tasks.model import Task


class EvalResult(BaseModel):
    tasks: int
    samples: int
    mean_reward: float
    pass_rate: float
    greedy_pass: float
    infrastructure_errors: int = 0
    prompts_too_long: int = 0
    pass_by_turn: list[float] = []
    fixed_later: float = 0.0
    mean_turns: float = 1.0


def evaluate(
    model: Any,
    tokenizer: Any,
    tasks: Sequence[Task],
    rollout: DojoRollout,
    *,
    samples: int,
    temperature: float,
    max_tokens: int,
) -> EvalResult:
    """Episodes of ``model`` on ``tasks``: ``samples`` sampled per task and one greedy."""
    policy = HFPolicy(model, tokenizer, name="eval", prompt_format=rollout.prompt_format)
    sampled = rollout.run_groups(
        policy, list(tasks), group_size=samples, sampling=SamplingParams(temperature=temperature, max_tokens=max_tokens)
    )
    greedy = rollout.run_groups(
        policy, list(tasks), group_size=1, sampling=SamplingParams(temperature=0.0, max_tokens=max_tokens)
    )
    episodes = [ep for g in sampled for ep in g.episodes]
    greedy_eps = [ep for g in greedy for ep in g.episodes]
    values = [ep.value for ep in episodes if ep.scored and ep.value is not None]
    n = max(1, len(episodes))
    turns = rollout.max_turns
    return EvalResult(
        tasks=len(tasks),
        samples=samples,
        mean_reward=sum(values) / len(values) if values else 0.0,
        pass_rate=sum(ep.passed for ep in episodes) / n,
        greedy_pass=sum(ep.passed for ep in greedy_eps) / max(1, len(greedy_eps)),
        infrastructure_errors=sum(
            1 for ep in episodes + greedy_eps if not ep.scored and ep.status != "prompt_too_long"
        ),
        prompts_too_long=sum(1 for ep in episodes + greedy_eps if ep.status == "prompt_too_long"),
        pass_by_turn=[sum(ep.passed and len(ep.turns) <= t + 1 for ep in episodes) / n for t in range(turns)],
        fixed_later=sum(ep.passed and len(ep.turns) >= 2 for ep in episodes) / n,
        mean_turns=sum(len(ep.turns) for ep in episodes) / n,
    )
