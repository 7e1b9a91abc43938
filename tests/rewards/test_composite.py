"""CompositeGrader: weighted parts, gates, hacks zeroing all, failures as no reward, every part in
the reward and in the trajectory store."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dojo.agent.episode import EpisodeConfig, EpisodeRunner
from dojo.rewards import Grader
from dojo.rewards.composite import CompositeGrader, Part, Signal
from dojo.rewards.judge_client import JudgeEndpoint
from dojo.rewards.judges import JudgeConfig, JudgeGrader
from dojo.rewards.outcome import Reward
from dojo.rewards.rubric import Criterion, Rubric
from dojo.rollout.store import TrajectoryStore, episode_row
from dojo.tasks.model import Task, TaskMetadata, TestCase
from tests.agent.scripted import ScriptedPolicy
from tests.rewards.judge_server import serve_judge

TASK = Task(
    id="q/1",
    form="answer",
    prompt="What is 6 * 7? Explain.",
    tests=[TestCase(expected="42")],
    metadata=TaskMetadata(source="test"),
)
RUBRIC = Rubric(criteria=[Criterion(name="clear", description="The explanation is clear.")])
RIGHT = "Six sevens are forty-two. <answer>42</answer>"
WRONG = "<answer>41</answer>"


def base() -> Grader:
    return Grader(None)  # type: ignore[arg-type]  # answer tasks grade without a sandbox


class Fixed:
    def __init__(self, reward: Reward) -> None:
        self.reward = reward
        self.calls = 0

    async def grade(self, task: Task, completion: str, *, seed: int | None = None) -> Reward:
        self.calls += 1
        return self.reward


def clear_judge(messages: list[dict[str, Any]], body: dict[str, Any]) -> str:
    return json.dumps({"clear": {"reason": "", "met": True}})


def judge(url: str) -> JudgeGrader:
    return JudgeGrader(JudgeConfig(endpoint=JudgeEndpoint(base_url=url, retries=0), rubric=RUBRIC))


async def test_parts_combine_by_weight_and_every_part_is_a_component() -> None:
    async with serve_judge(clear_judge) as url, judge(url) as j:
        composite = CompositeGrader(
            base(),
            [
                Part("tests", base(), weight=2),
                Part("judge", j, weight=1, requires=("tests",)),
                Part("short", Signal(lambda t: float(len(t) < 20)), weight=1),
            ],
        )
        reward = await composite.grade(TASK, RIGHT)
    assert reward.value == pytest.approx((2 * 1.0 + 1 * 1.0 + 0.0) / 4)
    assert reward.verdict == "partial"  # the tests pass, a signal does not
    c = reward.components
    assert c["tests"] == 1.0 and c["judge"] == 1.0 and c["short"] == 0.0 and c["judge.gated"] == 0.0
    assert c["tests.correctness"] == 1.0 and c["judge.judge:clear"] == 1.0
    assert composite.stats.as_dict()["scored"] == 1


async def test_a_judge_counts_only_if_the_tests_pass_and_is_not_asked_otherwise() -> None:
    judged = Fixed(Reward(value=1.0, verdict="pass"))
    composite = CompositeGrader(base(), [Part("tests", base()), Part("judge", judged, requires=("tests",))])
    reward = await composite.grade(TASK, WRONG)
    assert reward.value == 0.0 and judged.calls == 0
    assert reward.components["judge.gated"] == 1.0 and reward.components["judge"] == 0.0


async def test_a_hack_flag_anywhere_zeroes_all() -> None:
    hacked = Fixed(Reward(value=1.0, verdict="pass", flags=["hack:injection_override"]))
    composite = CompositeGrader(base(), [Part("tests", base()), Part("judge", hacked)])
    reward = await composite.grade(TASK, RIGHT)
    assert (reward.value, reward.verdict) == (0.0, "hack")
    assert reward.components["tests"] == 1.0 and "hack:injection_override" in reward.flags


async def test_a_part_without_a_value_makes_the_reward_none() -> None:
    down = Fixed(Reward(value=None, verdict="infrastructure_error", error="judge down"))
    reward = await CompositeGrader(base(), [Part("tests", base()), Part("judge", down)]).grade(TASK, RIGHT)
    assert reward.value is None and reward.verdict == "infrastructure_error" and "judge down" in (reward.error or "")


async def test_no_answer_earns_nothing_from_the_other_parts() -> None:
    """The module doc's own mix (tests 0.6, a length signal 0.1) paid an empty reply 0.14: doing
    nothing earns 0, while a negative part still counts."""
    parts = [Part("tests", base(), weight=0.6), Part("short", Signal(lambda t: float(len(t) < 2000)), weight=0.1)]
    empty = await CompositeGrader(base(), parts).grade(TASK, "")
    assert (empty.value, empty.verdict) == (0.0, "no_answer") and empty.components["short"] == 1.0
    costly = Fixed(Reward(value=-1.0, verdict="fail"))
    penalised = await CompositeGrader(base(), [Part("tests", base()), Part("cost", costly)]).grade(TASK, "")
    assert penalised.value == pytest.approx(-0.5)
    wrong = await CompositeGrader(base(), parts).grade(TASK, WRONG)
    assert wrong.value == pytest.approx(0.1 / 0.7)  # a reply with an answer keeps its signals


def test_bad_compositions_are_refused() -> None:
    with pytest.raises(ValueError, match="distinct"):
        CompositeGrader(base(), [Part("a", base()), Part("a", base())])
    with pytest.raises(ValueError, match="before it"):
        CompositeGrader(base(), [Part("a", base(), requires=("b",)), Part("b", base())])


async def test_an_episode_stores_every_component(tmp_path: Path) -> None:
    async with serve_judge(clear_judge) as url, judge(url) as j:
        composite = CompositeGrader(base(), [Part("tests", base()), Part("judge", j, requires=("tests",))])
        runner = EpisodeRunner(ScriptedPolicy(lambda m, i: RIGHT), composite, EpisodeConfig())
        episode = await runner.run(TASK)
    store = TrajectoryStore(str(tmp_path / "run"))
    store.write([episode_row(episode, TASK, store.run_id)])
    (row,) = store.rows()
    stored = json.loads(row["components"])
    assert row["reward"] == 1.0 and stored["judge"] == 1.0 and stored["judge.judge:clear"] == 1.0
