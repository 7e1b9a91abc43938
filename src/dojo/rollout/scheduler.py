"""The rollout scheduler: many episodes at once, so neither the policy nor the sandboxes wait.

Every task becomes a *group* of ``group_size`` episodes (GRPO's samples of one prompt). Groups run
concurrently and independently, and each finished group is handed on at once: a slow episode holds
back its own group only, never a batch. What bounds the work:

- ``policy_concurrency``: policy requests in flight (the server's batch);
- ``sandbox_concurrency``: tool runs and gradings in flight;
- ``max_groups_in_flight``: groups started but not yet taken by the consumer. When the consumer
  (a trainer, the store) is slow, the scheduler waits instead of queueing without bound.

Tasks are read ``lookahead`` at a time and the one expected to be slowest (``CostModel``) starts
first. An episode that failed for infrastructure reasons (policy server, sandbox, deadline) is
retried up to ``max_attempts`` times with backoff; it is never scored. A group whose episode still
failed is marked incomplete and counted. ``batches()`` adds dynamic sampling: groups whose rewards
are all equal carry no GRPO signal and are left out, and more groups are drawn to fill the batch.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import AsyncIterator, Container, Iterable
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field

from dojo.agent.episode import FINAL_STATUSES, Episode, EpisodeConfig, EpisodeRunner
from dojo.agent.policy import Policy
from dojo.agent.turn_rewards import ProcessScorer
from dojo.rewards.graders import Grader
from dojo.rollout.costs import CostModel
from dojo.tasks.model import Task

logger = logging.getLogger(__name__)


class RolloutConfig(BaseModel):
    """How a rollout is scheduled. Every field has a default."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    group_size: int = Field(4, ge=1, le=1024, description="Episodes per task (GRPO's n).")
    policy_concurrency: int = Field(32, ge=1, description="Policy requests in flight at once.")
    sandbox_concurrency: int | None = Field(
        None, ge=1, description="Tool runs and gradings in flight (default: 2x slots)."
    )
    max_groups_in_flight: int = Field(16, ge=1, description="Groups started and not yet consumed (backpressure).")
    lookahead: int = Field(64, ge=1, description="Tasks read ahead to choose the slowest first.")
    cost_aware: bool = Field(True, description="Start the tasks expected to be slowest first.")
    max_attempts: int = Field(3, ge=1, le=20, description="Tries of an episode that failed for infrastructure reasons.")
    retry_backoff: float = Field(0.2, ge=0.0, description="Seconds before the first retry; doubles each time.")
    episode: EpisodeConfig = Field(default_factory=EpisodeConfig)


@dataclass
class Group:
    """The episodes of one task. ``complete`` when every episode was scored."""

    task: Task
    group_id: str
    episodes: list[Episode]
    seconds: float = 0.0

    @property
    def complete(self) -> bool:
        return all(ep.scored for ep in self.episodes)

    @property
    def rewards(self) -> list[float]:
        return [ep.value for ep in self.episodes if ep.value is not None]

    @property
    def informative(self) -> bool:
        """Rewards differ within the group: GRPO's advantages are not all zero."""
        return self.complete and len(set(self.rewards)) > 1


@dataclass
class RolloutStats:
    """Live counters of a rollout (what a progress bar shows)."""

    started: float = field(default_factory=time.perf_counter)
    groups: int = 0
    groups_incomplete: int = 0
    groups_constant: int = 0
    groups_skipped: int = 0
    episodes: int = 0
    passed: int = 0
    reward_sum: float = 0.0
    scored: int = 0
    completion_tokens: int = 0
    retries: collections.Counter[str] = field(default_factory=collections.Counter)
    failures: collections.Counter[str] = field(default_factory=collections.Counter)
    last_error: dict[str, str] = field(default_factory=dict)  # each failure status's latest error message

    def add(self, group: Group) -> None:
        self.groups += 1
        self.groups_incomplete += not group.complete
        for ep in group.episodes:
            self.episodes += 1
            self.completion_tokens += ep.completion_tokens
            if ep.scored and ep.reward is not None and ep.reward.value is not None:
                self.scored += 1
                self.reward_sum += ep.reward.value
                self.passed += ep.passed
            else:
                self.failures[ep.status] += 1
                self.last_error[ep.status] = ep.error or ""

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    @property
    def pass_rate(self) -> float:
        return self.passed / self.scored if self.scored else 0.0

    @property
    def mean_reward(self) -> float:
        return self.reward_sum / self.scored if self.scored else 0.0

    @property
    def episodes_per_second(self) -> float:
        return self.episodes / self.elapsed if self.elapsed > 0 else 0.0


_DONE = object()


class RolloutScheduler:
    """Runs groups of episodes of ``policy`` on tasks and yields each group as it finishes."""

    def __init__(
        self,
        policy: Policy,
        grader: Grader,
        config: RolloutConfig | None = None,
        *,
        costs: CostModel | None = None,
        user: Policy | None = None,
        process: ProcessScorer | None = None,
    ) -> None:
        self.config = config or RolloutConfig()
        self.grader = grader
        self.costs = costs or CostModel()
        self.stats = RolloutStats()
        self._said: set[str] = set()  # the unscored statuses already logged (once each)
        slots = self.config.sandbox_concurrency
        if slots is None:
            slots = 2 * grader.sandbox.pool_size
        self.runner = EpisodeRunner(
            policy,
            grader,
            self.config.episode,
            policy_slots=asyncio.Semaphore(self.config.policy_concurrency),
            sandbox_slots=asyncio.Semaphore(max(1, slots)),
            user=user,
            process=process,  # per-turn rewards (dojo.agent.turn_rewards)
        )

    async def _episode(self, task: Task, group_id: str, index: int) -> Episode:
        ep = await self.runner.run(task, sample_index=index, group_id=group_id)
        for attempt in range(1, self.config.max_attempts):
            if ep.status in FINAL_STATUSES:  # scored, or a prompt the model's context cannot hold
                break
            self.stats.retries[ep.status] += 1
            await asyncio.sleep(self.config.retry_backoff * 2 ** (attempt - 1))
            ep = await self.runner.run(task, sample_index=index, group_id=group_id, attempt=attempt)
        if ep.status not in FINAL_STATUSES and ep.status not in self._said:  # (once per status: the rest are counted)
            self._said.add(ep.status)
            logger.warning(
                "an episode of %s ended %s after %d attempt(s), unscored: %s (further ones are counted in "
                "stats.failures)", group_id, ep.status, ep.attempt + 1, ep.error or "no error given"
            )  # fmt: skip
        return ep

    async def _group(self, task: Task, group_id: str) -> Group:
        t0 = time.perf_counter()
        episodes = await asyncio.gather(*(self._episode(task, group_id, i) for i in range(self.config.group_size)))
        group = Group(task=task, group_id=group_id, episodes=list(episodes), seconds=time.perf_counter() - t0)
        walls = [ep.wall_seconds for ep in episodes if ep.scored]
        if walls:
            self.costs.observe(task, max(walls))
        return group

    async def run(self, tasks: Iterable[Task], *, skip: Container[str] = (), prefix: str = "") -> AsyncIterator[Group]:
        """Yield every group as it finishes (complete or not). Group ids are ``prefix`` and the task
        id, with ``@k`` added for the k-th repeat of a task id; ids in ``skip`` (already stored) are
        skipped."""
        cfg = self.config
        done: asyncio.Queue[object] = asyncio.Queue()
        in_flight = asyncio.Semaphore(cfg.max_groups_in_flight)
        running: set[asyncio.Task[None]] = set()

        async def one(task: Task, gid: str) -> None:
            try:
                await done.put(await self._group(task, gid))
            except BaseException as e:  # a bug, not an infrastructure failure: stop the run
                await done.put(e)
                raise

        async def produce() -> None:
            seen: collections.Counter[str] = collections.Counter()
            pending: list[tuple[Task, str]] = []
            source = iter(tasks)
            exhausted = False
            while True:
                while not exhausted and len(pending) < cfg.lookahead:
                    try:
                        task = next(source)
                    except StopIteration:
                        exhausted = True
                        break
                    k = seen[task.id]
                    seen[task.id] += 1
                    gid = prefix + (task.id if k == 0 else f"{task.id}@{k}")
                    if gid in skip:
                        self.stats.groups_skipped += 1
                        continue
                    pending.append((task, gid))
                if not pending:
                    break
                await in_flight.acquire()
                pick = 0
                if cfg.cost_aware:
                    pick = max(range(len(pending)), key=lambda i: self.costs.predict(pending[i][0]))
                task, gid = pending.pop(pick)
                job = asyncio.create_task(one(task, gid))
                running.add(job)
                job.add_done_callback(running.discard)
            if running:
                await asyncio.gather(*list(running), return_exceptions=True)
            await done.put(_DONE)

        producer = asyncio.create_task(produce())
        try:
            while True:
                item = await done.get()
                if item is _DONE:
                    break
                if isinstance(item, BaseException):
                    raise item
                assert isinstance(item, Group)
                in_flight.release()
                self.stats.add(item)
                yield item
            await producer
        finally:
            producer.cancel()
            for job in list(running):
                job.cancel()
            await asyncio.gather(producer, *running, return_exceptions=True)

    async def batches(
        self, tasks: Iterable[Task], batch_size: int, *, skip: Container[str] = ()
    ) -> AsyncIterator[list[Group]]:
        """Batches of ``batch_size`` informative groups (dynamic sampling): groups with equal
        rewards, or incomplete ones, are left out and more are drawn. The last batch may be short."""
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        batch: list[Group] = []
        async for group in self.run(tasks, skip=skip):
            if not group.informative:
                self.stats.groups_constant += group.complete
                continue
            batch.append(group)
            if len(batch) == batch_size:
                yield batch
                batch = []
        if batch:
            yield batch
