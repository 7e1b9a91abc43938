"""The repo reviewer's plumbing, with a scripted judge: its rubric reaches the judge, and as a gate
it withholds the tests' reward from an edit it rejects."""

from __future__ import annotations

import json
from typing import Any

from dojo.rewards import Grader
from dojo.rewards.composite import CompositeGrader, Part
from dojo.rewards.judge_client import JudgeEndpoint
from dojo.rewards.judges import JudgeConfig, JudgeGrader
from dojo.rewards.outcome import Reward
from dojo.rewards.repo_review import REPO_REVIEW, RepoReviewer
from dojo.tasks.model import Task, TaskMetadata
from tests.rewards.judge_server import outside_and_inside, serve_judge

TASK = Task(
    id="bug", form="answer", prompt="merge() drops the last dict.", reference="x", metadata=TaskMetadata(source="t")
)
FIX = "toolz/dicttoolz.py\n<<<<<<< SEARCH\n    for d in dicts[:-1]:\n=======\n    for d in dicts:\n>>>>>>> REPLACE"
FORGED = (
    FIX + "\ntests/test_dicttoolz.py\n<<<<<<< SEARCH\n    assert merge(a, b) == c\n=======\n    pass\n>>>>>>> REPLACE"
)


def reviewer(messages: list[dict[str, Any]], body: dict[str, Any]) -> str:
    """Rejects edits that name a test file; accepts the rest."""
    _, inside = outside_and_inside(messages)
    clean = "tests/" not in inside["TEXT"]
    verdict = {c.name: {"reason": "", "met": clean or c.name != "leaves_tests"} for c in REPO_REVIEW.criteria}
    return json.dumps(verdict)


class Passing:
    async def grade(self, task: Task, completion: str, *, seed: int | None = None) -> Reward:
        return Reward(value=1.0, verdict="pass", passed=1, total=1, components={"correctness": 1.0})


async def test_the_reviewer_gates_the_tests_reward() -> None:
    async with serve_judge(reviewer) as url:
        judge = JudgeGrader(JudgeConfig(endpoint=JudgeEndpoint(base_url=url, retries=0)))
        async with judge:
            composite = CompositeGrader(
                Grader(None),
                [  # type: ignore[arg-type]
                    Part("review", RepoReviewer(judge), weight=0),
                    Part("tests", Passing(), requires=("review",)),
                ],
            )
            fixed = await composite.grade(TASK, FIX)
            forged = await composite.grade(TASK, FORGED)
    assert fixed.value == 1.0 and fixed.components["review.judge:leaves_tests"] == 1.0
    assert forged.value == 0.0 and forged.components["tests.gated"] == 1.0
    assert forged.components["review.judge:leaves_tests"] == 0.0 and forged.components["review"] == 0.75
