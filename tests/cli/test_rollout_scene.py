"""``dojo rollout`` of a 3D scene task in tools mode: a served policy calls the scene tools over
several steps, sees each call's result, and the final scene is graded by geometry."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from typer.testing import CliRunner

from dojo.agent.policy import Completion, ToolCall
from dojo.tasks import load_source
from tests.agent.scripted import ScriptedPolicy, served
from tests.sandbox.conftest import SKIP_REASON

pytestmark = pytest.mark.skipif(bool(SKIP_REASON), reason=SKIP_REASON or "")
SOURCE = "family:scene3d?n=1&difficulty=0.6&seed=2"  # a table or a row of crates: a dozen calls


def builder(messages: list[dict[str, Any]], _: int) -> Completion:
    """Two calls per reply, in the gold's order, then a reply without a call."""
    gold = json.loads(load_source(SOURCE)[0].reference or "")["turns"][0][0]
    done = sum(len(m.get("tool_calls") or []) for m in messages if m["role"] == "assistant")
    batch = gold[done : done + 2]
    if not batch:
        return Completion(text="The scene is built.")
    return Completion(text="", tool_calls=[ToolCall(name=c["name"], arguments=c["arguments"]) for c in batch])


@pytest.fixture
def scene_server() -> Iterator[tuple[str, ScriptedPolicy]]:
    policy = ScriptedPolicy(builder)
    with served(policy) as url:
        yield url, policy


def test_rollout_builds_a_scene_with_the_tools_and_earns_its_reward(
    scene_server: tuple[str, ScriptedPolicy], tmp_path: Path
) -> None:
    from dojo.cli import app

    url, policy = scene_server
    out, summary = tmp_path / "run", tmp_path / "summary.json"
    args = ["rollout", SOURCE, "--policy", url, "--model", "scripted", "--out", str(out), "-n", "1",
            "--mode", "tools", "--max-turns", "16", "--json", str(summary)]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    data = json.loads(summary.read_text())
    assert data["episodes"] == 1 and data["pass@1"] == 1.0, data
    assert len(policy.calls) > 3  # several steps, each after the previous calls' results
    assert set(policy.offered[0]) >= {"create_box", "group", "rotate", "list_objects"}
    tool_results = [m for m in policy.calls[-1] if m["role"] == "tool"]
    assert tool_results and '"bbox"' in tool_results[0]["content"]  # the model saw where its object went
    assert pd.read_parquet(out)["reward"].tolist() == [1.0]
