from __future__ import annotations

import collections
import json

import pytest

from dojo.tasks import Task, TaskMetadata, TestCase
from dojo.tasks.curriculum import CurriculumSampler


def tasks(n: int = 30) -> list[Task]:
    return [
        Task(
            id=f"t{i}",
            form="answer",
            prompt=f"q{i}",
            tests=[TestCase(expected="1")],
            metadata=TaskMetadata(difficulty=i / (n - 1)),
        )
        for i in range(n)
    ]


def test_prefers_tasks_the_policy_sometimes_solves() -> None:
    sampler = CurriculumSampler(tasks(), seed=1, level=0.5, width=10.0)
    for t in sampler.tasks.values():
        sampler.update(t.id, {"t3": 0.5, "t4": 0.4}.get(t.id, 1.0 if t.id < "t2" else 0.0))
    counts = collections.Counter(t.id for _ in range(300) for t in sampler.sample(3))
    assert counts["t3"] > counts["t20"] * 3 and counts["t4"] > counts["t21"] * 3


def test_level_follows_the_pass_rate() -> None:
    sampler = CurriculumSampler(tasks(), seed=0, level=0.0, step=0.2)
    for _ in range(20):
        for t in sampler.sample(8):
            sampler.update(t.id, 1.0)
    assert sampler.level == 1.0
    drawn = [t.difficulty or 0 for _ in range(20) for t in sampler.sample(5)]
    assert sum(drawn) / len(drawn) > 0.6  # at the top level, hard tasks come first
    for _ in range(20):
        for t in sampler.sample(8):
            sampler.update(t.id, 0.0)
    assert sampler.level < 1.0


def test_state_round_trips_through_json_and_resumes_identically() -> None:
    a = CurriculumSampler(tasks(), seed=7)
    for t in a.sample(10):
        a.update(t.id, 0.5)
    state = json.loads(json.dumps(a.state_dict()))
    b = CurriculumSampler(tasks(), seed=999)
    b.load_state_dict(state)
    assert [t.id for t in a.sample(12)] == [t.id for t in b.sample(12)]
    assert a.state_dict() == b.state_dict()


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one task"):
        CurriculumSampler([])
    sampler = CurriculumSampler(tasks(3))
    with pytest.raises(KeyError, match="not in this curriculum"):
        sampler.update("nope", 1.0)
    with pytest.raises(ValueError, match="pass_rate"):
        sampler.update("t0", 2.0)
    with pytest.raises(ValueError, match="not in this task set"):
        sampler.load_state_dict({"level": 0, "pass_rate": {"zzz": 1}, "attempts": {}, "recent": [], "rng": []})


def test_untried_tasks_of_every_level_are_drawn() -> None:
    sampler = CurriculumSampler(tasks(), seed=3, level=0.5, width=1e6)  # a curriculum turned off
    quarter = collections.Counter(min(3, int((t.difficulty or 0) * 4)) for _ in range(300) for t in sampler.sample(4))
    assert set(quarter) == {0, 1, 2, 3}
    assert min(quarter.values()) > 0.6 * max(quarter.values())  # no level starved before it is measured
