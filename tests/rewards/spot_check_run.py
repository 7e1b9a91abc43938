"""The spot-check targets end to end: a judge with a known error rate grades a run, the CLI draws a
review set and measures agreement with the truth; a judge with a position bias is compared pairwise.
Used by ``tests/cli/test_judge.py`` (small) and ``bench/judge_agreement.py`` (1,000 items)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from dojo.cli import app
from dojo.rewards.judge_client import JudgeEndpoint
from dojo.rewards.judges import JudgeConfig, JudgeGrader
from dojo.rewards.review import Label
from dojo.rewards.rubric import Criterion, Rubric
from dojo.tasks.model import Task, TaskMetadata
from tests.rewards.judge_server import FlippingJudge, first_preferring, serve_judge
from tests.rewards.judged_runs import judged_store, write_labels

RUBRIC = Rubric(criteria=[Criterion(name="right", description="The answer is right.")])
TASK = Task(id="essay", form="answer", prompt="Is it right?", reference="x", metadata=TaskMetadata(source="t"))


async def flipped_agreement(workdir: Path, n: int, rate: float, seed: int = 0) -> dict[str, Any]:
    """Grade ``n`` texts with a judge flipping ``rate`` of its verdicts; the CLI's agreement (as JSON)."""
    rng = random.Random(seed)
    truth = [rng.random() < 0.5 for _ in range(n)]
    texts = [f"Answer {k}: this is {'correct' if good else 'wrong'}." for k, good in enumerate(truth)]
    async with serve_judge(FlippingJudge(rate, seed=seed + 7919)) as url:  # (its own draws, not the truth's)
        config = JudgeConfig(endpoint=JudgeEndpoint(base_url=url, retries=0), rubric=RUBRIC)
        async with JudgeGrader(config) as judge:
            rewards = [await judge.grade(TASK, text) for text in texts]
    judged_store(workdir / "run", texts, rewards)
    runner = CliRunner()
    out = runner.invoke(app, ["judge", "sample", str(workdir / "run"), "--rate", "1", "--out", str(workdir / "review")])
    assert out.exit_code == 0, out.output
    labels = [Label(item_id=f"essay#{k}", label="pass" if good else "fail") for k, good in enumerate(truth)]
    path = write_labels(workdir / "truth.jsonl", labels)
    plot = workdir / "calibration.png"
    args = ["judge", "agreement", str(workdir / "review"), "--labels", str(path), "--json", "--plot", str(plot)]
    out = runner.invoke(app, args)
    assert out.exit_code == 0, out.output
    result: dict[str, Any] = json.loads(out.output)
    return result


async def position_flips(n: int) -> float:
    """The share of ``n`` comparisons by a judge that always prefers the first answer that are caught as flips."""
    async with serve_judge(first_preferring) as url:
        config = JudgeConfig(endpoint=JudgeEndpoint(base_url=url, retries=0), rubric=RUBRIC)
        async with JudgeGrader(config) as judge:
            for k in range(n):
                await judge.compare(TASK.prompt_text(), f"answer one {k}", f"answer two {k}")
            return judge.judge_stats.flip_rate
