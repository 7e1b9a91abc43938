"""The scheduler with scripted policies and the real sandbox."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from dojo.agent.episode import EpisodeConfig
from dojo.agent.policy import SamplingParams
from dojo.rewards import Grader
from dojo.rollout import CostModel, RolloutConfig, RolloutScheduler
from dojo.tasks.model import Task
from tests.agent.scripted import RIGHT, WRONG, ScriptedPolicy, broken, double_task, fixed


def _task_of(messages: list[dict[str, Any]]) -> str:
    return str(messages[0]["content"]).split("#", 2)[1].strip().split()[0]


def _tagged(i: int) -> Task:
    """double_task whose prompt starts with its id, so a scripted policy knows which task it sees."""
    t = double_task(f"t{i}")
    return t.model_copy(update={"prompt": f"# t{i}\n{t.prompt}"})


async def test_every_task_becomes_one_group_of_n(grader: Grader) -> None:
    tasks = [_tagged(i) for i in range(6)] + [_tagged(0)]  # t0 twice: a second group, t0@1
    sched = RolloutScheduler(fixed(RIGHT), grader, RolloutConfig(group_size=3))
    groups = [g async for g in sched.run(tasks)]
    assert sorted(g.group_id for g in groups) == sorted([f"t{i}" for i in range(6)] + ["t0@1"])
    for g in groups:
        assert [ep.sample_index for ep in g.episodes] == [0, 1, 2]
        assert g.complete and g.rewards == [1.0, 1.0, 1.0] and not g.informative
    ids = [ep.episode_id for g in groups for ep in g.episodes]
    assert len(ids) == len(set(ids)) == 21
    assert sched.stats.episodes == 21 and sched.stats.pass_rate == 1.0


async def test_skip_resumes_without_redoing_groups(grader: Grader) -> None:
    sched = RolloutScheduler(fixed(RIGHT), grader, RolloutConfig(group_size=1))
    groups = [g async for g in sched.run([_tagged(i) for i in range(4)], skip={"t1", "t3"})]
    assert sorted(g.group_id for g in groups) == ["t0", "t2"] and sched.stats.groups_skipped == 2


async def test_infrastructure_failures_are_retried_and_never_scored(grader: Grader) -> None:
    flaky = ScriptedPolicy(lambda _m, i: broken("503 overloaded") if i < 4 else RIGHT)  # every first try fails
    cfg = RolloutConfig(group_size=2, retry_backoff=0.0, policy_concurrency=1)
    sched = RolloutScheduler(flaky, grader, cfg)
    groups = [g async for g in sched.run([_tagged(0), _tagged(1)])]
    assert all(g.complete for g in groups)
    assert all(ep.attempt == 1 and ep.value == 1.0 for g in groups for ep in g.episodes)
    assert sched.stats.retries["policy_error"] == 4

    down = RolloutScheduler(fixed(broken()), grader, RolloutConfig(group_size=2, max_attempts=3, retry_backoff=0.0))
    (group,) = [g async for g in down.run([_tagged(0)])]
    assert not group.complete and group.rewards == []  # no 0 stands in for a failure
    assert down.stats.groups_incomplete == 1 and down.stats.retries["policy_error"] == 4
    assert down.stats.failures["policy_error"] == 2 and down.stats.scored == 0


async def test_dynamic_sampling_keeps_only_groups_with_signal(grader: Grader) -> None:
    # even tasks: every sample right (no signal); odd tasks: samples alternate right/wrong
    def script(messages: list[dict[str, Any]], call: int) -> str:
        n = int(_task_of(messages)[1:])
        return RIGHT if n % 2 == 0 or call % 2 == 0 else WRONG

    policy = ScriptedPolicy(script)
    sched = RolloutScheduler(policy, grader, RolloutConfig(group_size=2, policy_concurrency=1, max_groups_in_flight=1))
    batches = [b async for b in sched.batches([_tagged(i) for i in range(8)], batch_size=2)]
    kept = [g.group_id for b in batches for g in b]
    assert sorted(kept) == ["t1", "t3", "t5", "t7"] and [len(b) for b in batches] == [2, 2]
    assert all(g.informative for b in batches for g in b)
    assert sched.stats.groups_constant == 4


async def test_slowest_expected_tasks_start_first(grader: Grader) -> None:
    costs = CostModel()
    tasks = [_tagged(i) for i in range(5)]
    for i, t in enumerate(tasks):
        costs.observe(t, [0.1, 5.0, 0.3, 2.0, 0.2][i])
    policy = fixed(RIGHT)
    cfg = RolloutConfig(group_size=1, max_groups_in_flight=1)
    _ = [g async for g in RolloutScheduler(policy, grader, cfg, costs=costs).run(tasks)]
    assert [_task_of(m) for m in policy.calls] == ["t1", "t3", "t2", "t4", "t0"]
    plain = fixed(RIGHT)
    cfg = RolloutConfig(group_size=1, max_groups_in_flight=1, cost_aware=False)
    _ = [g async for g in RolloutScheduler(plain, grader, cfg, costs=costs).run(tasks)]
    assert [_task_of(m) for m in plain.calls] == ["t0", "t1", "t2", "t3", "t4"]


async def test_cost_model_learns_and_persists() -> None:
    costs = CostModel(alpha=0.5)
    a, b = double_task("a"), double_task("b")
    costs.observe(a, 2.0)
    costs.observe(a, 4.0)
    assert costs.predict(a) == 3.0
    assert costs.predict(b) == 3.0  # unseen: the mean of its source/difficulty bucket
    again = CostModel()
    again.load_state_dict(costs.state_dict())
    assert again.predict(a) == 3.0
    with pytest.raises(ValueError, match="CostModel"):
        again.load_state_dict({"alpha": 1})


async def test_backpressure_and_concurrency_limits(grader: Grader) -> None:
    started: set[str] = set()

    def script(messages: list[dict[str, Any]], _call: int) -> str:
        started.add(_task_of(messages))
        return RIGHT

    policy = ScriptedPolicy(script, delay=0.01)
    cfg = RolloutConfig(group_size=4, policy_concurrency=3, max_groups_in_flight=2)
    sched = RolloutScheduler(policy, grader, cfg)
    consumed = 0
    async for _ in sched.run([_tagged(i) for i in range(8)]):
        consumed += 1
        await asyncio.sleep(0.1)  # a slow trainer
        # never more than max_groups_in_flight started beyond what was consumed
        assert len(started) - consumed <= cfg.max_groups_in_flight
    assert consumed == 8
    assert policy.max_active <= 3


async def test_deadline_is_retried_then_dropped(grader: Grader, caplog: pytest.LogCaptureFixture) -> None:
    slow = ScriptedPolicy(lambda _m, _i: RIGHT, delay=2.0)
    episode = EpisodeConfig(time_limit=0.1, sampling=SamplingParams(max_tokens=1))  # (0.1 s of decoding allowed)
    cfg = RolloutConfig(group_size=2, max_attempts=2, retry_backoff=0.0, episode=episode)
    sched = RolloutScheduler(slow, grader, cfg)
    (group,) = [g async for g in sched.run([_tagged(0)])]
    assert not group.complete and group.episodes[0].status == "deadline"
    assert sched.stats.retries["deadline"] == 2
    # said once, not only counted (a library user's run had ended with no batch and no word of why)
    said = [r.getMessage() for r in caplog.records if r.name == "dojo.rollout.scheduler"]
    assert len(said) == 1 and "ended deadline after 2 attempt(s), unscored" in said[0], said


async def test_a_prompt_past_the_context_is_not_retried(grader: Grader) -> None:
    from dojo.agent.policy import ContextFull

    policy = fixed(ContextFull("This model's maximum context length is 1024 tokens."))
    sched = RolloutScheduler(policy, grader, RolloutConfig(group_size=1, max_attempts=3, retry_backoff=0.0))
    (group,) = [g async for g in sched.run([_tagged(0)])]
    assert group.episodes[0].status == "prompt_too_long" and not group.complete
    assert len(policy.calls) == 1 and not sched.stats.retries  # the same prompt would not fit again


async def test_a_first_request_the_server_refuses_is_not_retried(grader: Grader) -> None:
    from dojo.agent.policy import RequestRefused

    policy = fixed(RequestRefused("refused (400): auto tool choice requires --enable-auto-tool-choice"))
    sched = RolloutScheduler(policy, grader, RolloutConfig(group_size=1, max_attempts=3, retry_backoff=0.0))
    (group,) = [g async for g in sched.run([_tagged(0)])]
    assert group.episodes[0].status == "prompt_refused" and not group.complete
    assert len(policy.calls) == 1 and not sched.stats.retries
