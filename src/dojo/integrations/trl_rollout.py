"""dojo's episodes as a TRL ``rollout_func`` (``GRPOTrainer(rollout_func=...)``): what ``dojo train``
generates with, and what any TRL user can pass.

Each step's prompts run as dojo episodes through the same ``RolloutScheduler`` and
``EpisodeRunner`` that ``dojo rollout`` uses: one GRPO group of ``num_generations`` episodes per
task, every episode graded by dojo's graders in the sandbox. The episode mode is

- ``single``: one reply, graded;
- ``feedback``: the reply's code runs on the task's *visible* tests; if some fail, the failures go
  back as the next user turn (code → run → error → fix), up to ``max_turns`` replies; the last
  reply is graded on every test, hidden ones included;
- ``tools``: the model calls dojo's tools (``<tool_call>`` text) for up to ``max_turns`` replies.

The policy is the trainer's own model, in process (``HFPolicy``: batched, token-exact across
turns), or a served one (``policy=OpenAIPolicy(url)``, with ``weights=ServedWeights(url, dir)`` to
push the trainer's weights to it before each step's generation). TRL receives each episode as one
completion (``dojo.agent.tokens``): the model's tokens (``env_mask`` 1) and what the environment
added between replies (``env_mask`` 0, never trained on), the logprob of each sampled token, and
the reward as the extra field ``dojo_reward``, which ``episode_reward`` hands to TRL. An episode
without a reward (a sandbox or policy failure, after the scheduler's retries) or without a
consistent token record gives ``None``: TRL leaves it out of its group's baseline and gives it no
advantage; it is never a 0.

    rollout = DojoRollout(tasks, mode="feedback", max_turns=2)
    trainer = GRPOTrainer(model, reward_funcs=episode_reward, rollout_func=rollout,
                          train_dataset=Dataset.from_list(task_rows(tasks)), args=args)
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal

from dojo.agent.episode import Episode, EpisodeConfig
from dojo.agent.hf_policy import HFPolicy, PromptFormat
from dojo.agent.policy import Policy, SamplingParams
from dojo.agent.policy_pool import PolicyPool
from dojo.agent.tokens import EpisodeTokens, TokenRecordError, episode_tokens
from dojo.agent.turn_rewards import ProcessScorer
from dojo.agent.weight_sync import ServedWeights
from dojo.errors import DojoError, InputError
from dojo.integrations.event_loops import SANDBOXES, BackgroundLoop
from dojo.rewards import Grader, GradingConfig, Reward
from dojo.rewards.config import DEFAULT_GRADING
from dojo.rollout.scheduler import Group, RolloutConfig, RolloutScheduler
from dojo.sandbox import SandboxAPI
from dojo.tasks.model import Task

EpisodeMode = Literal["single", "feedback", "tools"]
GroupHook = Callable[[list[Group]], None]

logger = logging.getLogger(__name__)
UNSCORABLE_PROMPT_TOKENS = 64  # the prompt an unscorable row keeps (``DojoRollout._row``)


def episode_reward(
    prompts: Sequence[Any], completions: Sequence[Any], dojo_reward: Sequence[float | None] | None = None, **_: Any
) -> list[float | None]:
    """The reward ``DojoRollout`` computed for each episode (pass it as ``reward_funcs``)."""
    if dojo_reward is None:
        raise InputError("no `dojo_reward` field: episode_reward scores rollouts of dojo's DojoRollout only")
    if len(dojo_reward) != len(completions):
        raise DojoError(f"{len(dojo_reward)} episode rewards for {len(completions)} completions")
    return list(dojo_reward)


def turn_totals(ep: Episode) -> list[float] | None:
    """An episode's per-turn process rewards (their totals), None when it has none."""
    return [parts["total"] for parts in ep.turn_rewards] if ep.turn_rewards is not None else None


def token_rewards(tokens: EpisodeTokens, turn_rewards: list[float]) -> list[float]:
    """Turn-level rewards as token-level ones: each turn's reward on the last token of that turn's
    reply (the k-th run of ``env_mask`` 1), 0 everywhere else; for trainers that take a reward per
    token (PRIME-style dense rewards)."""
    out = [0.0] * len(tokens.completion_ids)
    ends = [
        i for i, m in enumerate(tokens.env_mask) if m and (i + 1 == len(tokens.env_mask) or not tokens.env_mask[i + 1])
    ]
    for end, reward in zip(ends, turn_rewards, strict=False):
        out[end] = reward
    return out


def _prompt_key(prompt: Any) -> str:
    return prompt if isinstance(prompt, str) else json.dumps(prompt, sort_keys=True)


def episode_config(mode: EpisodeMode, max_turns: int, sampling: SamplingParams) -> EpisodeConfig:
    """The ``EpisodeConfig`` of an episode mode (tool calls as text, so that turns stay token-exact)."""
    if mode == "single":
        return EpisodeConfig(mode="feedback", max_turns=1, sampling=sampling)
    if mode == "feedback":
        return EpisodeConfig(mode="feedback", max_turns=max_turns, sampling=sampling)
    return EpisodeConfig(mode="tools", max_turns=max_turns, sampling=sampling, native_tools=False)


class GradeOnce(Grader):
    """A ``Grader`` that grades each distinct reply to a task once: the other copies of it (in a
    GRPO group most replies have a twin; the embedded default's groups of 8 hold 3 distinct replies
    on average, 36 of a step's 96) take the first copy's ``Reward``, as a sandbox run of the same
    code on the same tests gives. A copy that finds an infrastructure failure (no value) is graded
    again on its own. Stats count every copy, as a ``Grader`` that graded each would."""

    def __init__(self, sandbox: SandboxAPI, config: GradingConfig = DEFAULT_GRADING) -> None:
        super().__init__(sandbox, config)
        self._graded: dict[tuple[str, str, int | None], asyncio.Task[Reward]] = {}
        self.shared = 0  # copies that took another copy's grade

    async def grade(self, task: Task, completion: str, *, seed: int | None = None) -> Reward:
        key = (task.id, completion, seed)
        first = self._graded.get(key)
        if first is None:
            first = self._graded[key] = asyncio.ensure_future(self._grade(task, completion, seed))
            reward = await asyncio.shield(first)  # a copy cancelled while it waits cancels no other
        else:
            reward = await asyncio.shield(first)
            if reward.value is None:  # a failure is the sandbox's, not the reply's: try this copy itself
                reward = await self._grade(task, completion, seed)
            else:
                self.shared += 1
        self.stats.add(reward)
        return reward


class DojoRollout:
    """A ``rollout_func`` running dojo episodes (see the module doc).

    ``tasks``: the tasks of the dataset; each prompt is looked up by its text (or its messages).
    ``mode``/``max_turns``: the episode (``max_turns`` is ignored for ``single``). Sampling follows
    the trainer (temperature, top-p, and ``max_completion_length`` tokens per reply).
    ``on_groups``: called with each step's groups (the full ``Episode`` records) in prompt order.
    ``max_attempts``: tries of an episode that failed for infrastructure reasons.
    ``grade_once``: within one call (one step, one evaluation), a reply given more than once to the
    same task is graded once (``GradeOnce``); off, every episode runs its own grading.
    """

    def __init__(
        self,
        tasks: Iterable[Task],
        *,
        mode: EpisodeMode = "feedback",
        max_turns: int = 2,
        grading: GradingConfig = DEFAULT_GRADING,
        pool_size: int = 2,
        ray: str | None = None,
        policy: Policy | None = None,
        weights: ServedWeights | None = None,
        prompt_format: PromptFormat | None = None,
        on_groups: GroupHook | None = None,
        max_attempts: int = 2,
        process: ProcessScorer | None = None,
        grade_once: bool = True,
    ) -> None:
        if mode not in ("single", "feedback", "tools"):
            raise InputError(f"mode must be 'single', 'feedback' or 'tools', not {mode!r}")
        if max_turns < 1:
            raise InputError(f"max_turns must be at least 1, got {max_turns}")
        if weights is not None and policy is None:
            raise InputError("weights= syncs a served policy: pass policy= (an OpenAIPolicy) too")
        self.tasks: dict[str, Task] = {}
        for t in tasks:
            self.tasks[_prompt_key(t.prompt_text())] = t
            self.tasks[_prompt_key(t.messages())] = t
        if not self.tasks:
            raise InputError("DojoRollout needs the dataset's tasks (the prompts are looked up among them)")
        self.mode: EpisodeMode = mode
        self.max_turns = 1 if mode == "single" else max_turns
        self.grading = grading
        self.pool_size = pool_size
        self.ray = ray
        self.policy = policy
        self.weights = weights
        self.prompt_format = prompt_format
        self.on_groups = on_groups
        self.max_attempts = max_attempts
        self.process = process
        self.grade_once = grade_once
        self.token_mismatches = 0
        # episodes whose prompt alone fills the model's context (status prompt_too_long): nothing was
        # sampled, so there is nothing to train on (SciCode's longest prompts against the tiny model)
        self.context_overflows = 0
        self.last_groups: list[Group] = []
        self._local: HFPolicy | None = None
        self._synced_step: int | None = None
        self._loop = BackgroundLoop("dojo-rollout")

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("_loop")
        state.update(last_groups=[], _local=None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._loop = BackgroundLoop("dojo-rollout")

    def task_of(self, prompt: Any) -> Task:
        task = self.tasks.get(_prompt_key(prompt))
        if task is None:
            raise InputError(
                "a prompt is not among the tasks DojoRollout was built with; build the dataset with "
                "dojo.integrations.trl.task_rows(tasks) from the same tasks"
            )
        return task

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
        g = int(trainer.num_generations or 1)
        if len(prompts) % g:
            raise DojoError(f"{len(prompts)} prompts is not a whole number of groups of {g}")
        tasks = [self.task_of(prompts[k]) for k in range(0, len(prompts), g)]
        for k, task in enumerate(tasks):
            if any(self.task_of(p).id != task.id for p in prompts[k * g : (k + 1) * g]):
                raise DojoError(f"DojoRollout needs each prompt {g} times in a row (TRL's RepeatSampler order)")
        tokenizer = trainer.processing_class
        tokenizer = getattr(tokenizer, "tokenizer", tokenizer)  # a processor's inner tokenizer
        model = trainer.accelerator.unwrap_model(trainer.model)
        step = int(trainer.state.global_step)
        if self.weights is not None and self._synced_step != step:
            self.weights.push(model, tokenizer)
            if isinstance(self.policy, PolicyPool):  # a server that missed the weights would sample stale
                self.policy.only(self.weights.loaded)
            self._synced_step = step
        policy = self.policy or self._local_policy(model, tokenizer)
        sampling = SamplingParams(
            temperature=float(trainer.temperature),
            top_p=float(trainer.top_p),
            max_tokens=int(trainer.max_completion_length),
        )
        groups = self.run_groups(policy, tasks, group_size=g, sampling=sampling, prefix=f"step{step + 1:06d}/")
        self.last_groups = groups
        if self.on_groups is not None:
            self.on_groups(groups)
        rows = [self._row(ep, tokenizer) for group in groups for ep in group.episodes]
        return {
            "prompt_ids": [tokens.prompt_ids for tokens, _ in rows],
            "completion_ids": [tokens.completion_ids for tokens, _ in rows],
            "logprobs": [tokens.logprobs for tokens, _ in rows],
            "env_mask": [tokens.env_mask for tokens, _ in rows],
            "dojo_reward": [reward for _, reward in rows],
            "dojo_turns": [len(ep.turns) for group in groups for ep in group.episodes],
            # per turn: the process reward's total (process=ProcessScorer(...)); None without one
            "dojo_turn_rewards": [turn_totals(ep) for group in groups for ep in group.episodes],
        }

    def _local_policy(self, model: Any, tokenizer: Any) -> HFPolicy:
        if self._local is None or self._local.model is not model:
            self._local = HFPolicy(model, tokenizer, name="trainer", prompt_format=self.prompt_format)
        return self._local

    def run_groups(
        self, policy: Policy, tasks: list[Task], *, group_size: int, sampling: SamplingParams, prefix: str = ""
    ) -> list[Group]:
        """One group of ``group_size`` episodes per task (in the order of ``tasks``), with this
        rollout's mode, grading and sandbox: what each training step runs, and held-out evaluation."""
        config = RolloutConfig(
            group_size=group_size,
            policy_concurrency=max(1, len(tasks) * group_size),
            max_groups_in_flight=max(1, len(tasks)),
            lookahead=max(1, len(tasks)),
            max_attempts=self.max_attempts,
            episode=episode_config(self.mode, self.max_turns, sampling),
        )
        return self._loop.run(self._run(policy, config, tasks, prefix))

    async def _run(self, policy: Policy, config: RolloutConfig, tasks: list[Task], prefix: str) -> list[Group]:
        sandbox = await SANDBOXES.get(self.pool_size, self.ray)
        grader = GradeOnce(sandbox, self.grading) if self.grade_once else Grader(sandbox, self.grading)
        scheduler = RolloutScheduler(policy, grader, config, process=self.process)
        by_id = {group.group_id: group async for group in scheduler.run(tasks, prefix=prefix)}
        seen: dict[str, int] = {}
        ordered = []
        for task in tasks:  # the group ids the scheduler gave, in the prompts' order
            k = seen.get(task.id, 0)
            seen[task.id] = k + 1
            ordered.append(by_id[prefix + (task.id if k == 0 else f"{task.id}@{k}")])
        return ordered

    def _row(self, ep: Episode, tokenizer: Any) -> tuple[EpisodeTokens, float | None]:
        """An episode's tokens and reward; one without a reward or a token record, or without a
        sampled token, is unscorable (a row of one masked end-of-sequence token: TRL needs one)."""
        try:
            tokens = episode_tokens(ep)
        except TokenRecordError:
            if ep.turns:  # replies that do not chain: count it; a failed episode has no turns
                self.token_mismatches += 1
            tokens = None
        if tokens is not None and tokens.completion_ids:
            return tokens, ep.value if ep.scored else None
        if ep.status == "prompt_too_long":
            self.context_overflows += 1
            if self.context_overflows == 1:
                logger.warning(
                    "an episode's prompt filled the policy's context (%s): nothing was sampled, the episode is not "
                    "trained on; give the model a longer context or the task a shorter prompt",
                    ep.error,
                )
        prompt = ep.turns[0].completion.prompt_token_ids if ep.turns else None
        if not prompt:
            prompt = list(tokenizer(ep.messages[0].get("content") or " ", add_special_tokens=False)["input_ids"])
        # nothing is trained on this row, but TRL runs the model over all of it: a doc_analysis
        # prompt of 126,089 tokens took the trainer past 22 GB (killed); its tail is enough
        prompt = prompt[-UNSCORABLE_PROMPT_TOKENS:]
        eos = tokenizer.eos_token_id
        return EpisodeTokens(prompt_ids=prompt, completion_ids=[eos], logprobs=[0.0], env_mask=[0]), None

    def close(self) -> None:
        if self._loop.started:
            self._loop.run(SANDBOXES.close())
        self._loop.stop()
