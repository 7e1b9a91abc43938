"""``dojo rollout`` of the analysis and document families: a served policy answers each task with a
program or document, the episode is graded (in the sandbox and on the host) and its reward lands in
the store."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from typer.testing import CliRunner

from dojo.agent.policy import Completion
from dojo.tasks import load_source
from tests.agent.scripted import ScriptedPolicy, served
from tests.sandbox.conftest import SKIP_REASON

pytestmark = pytest.mark.skipif(bool(SKIP_REASON), reason=SKIP_REASON or "")
SOURCES = [
    "family:data_analysis?n=1&seed=1",
    "family:scientific?n=1&seed=1",
    "scicode:steps?n=1&seed=0",  # 38.2: reciprocal lattice vectors, a fast step
    "family:documents?n=1&seed=1",
]


def answer_with_the_reference(messages: list[dict[str, Any]], _: int) -> Completion:
    """The reference of the task whose prompt the last message is (a scripted, perfect policy)."""
    asked = str(messages[-1]["content"])
    for source in SOURCES:
        for task in load_source(source):
            if task.prompt_text().strip() in asked:
                return Completion(text=task.reference or "")
    return Completion(text="I do not know.")


@pytest.fixture(scope="module")
def reference_server() -> Iterator[str]:
    with served(ScriptedPolicy(answer_with_the_reference)) as url:
        yield url


@pytest.mark.parametrize("source", SOURCES)
def test_an_episode_of_each_new_family_earns_its_reward_in_the_store(
    reference_server: str, tmp_path: Path, source: str
) -> None:
    from dojo.cli import app

    out, summary = tmp_path / "run", tmp_path / "summary.json"
    args = ["rollout", source, "--policy", reference_server, "--model", "scripted", "--out", str(out), "-n", "1",
            "--max-tokens", "4096", "--json", str(summary)]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    data = json.loads(summary.read_text())
    assert data["episodes"] == 1 and data["pass@1"] == 1.0, data
    stored = pd.read_parquet(out)
    assert stored["reward"].tolist() == [1.0]
    assert stored["task_id"].tolist() == [load_source(source)[0].id]
