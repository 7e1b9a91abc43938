"""The verl bridge: compute_score backed by dojo's grader, the Parquet export in verl's row schema,
and (in a subprocess with verl's own classes, installed by `make test` into .verl-deps) the
sandbox tool and the feedback agent loop."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dojo.integrations import verl_data
from dojo.integrations.trl_rewards import DojoReward
from dojo.integrations.verl_data import RewardUnavailable, compute_score, export_verl_parquet, verl_rows
from dojo.rewards import Grader, GradingConfig
from dojo.tasks.model import Task
from tests.integrations.conftest import DeadSandbox, arith_tasks

ROOT = Path(__file__).resolve().parents[2]
VERL_DEPS = ROOT / ".verl-deps"
TASKS = arith_tasks(["x + 1", "x * 2"])


@pytest.fixture
def graders() -> Iterator[None]:
    """compute_score's warm graders live as long as the worker; a test closes them at its end."""
    yield
    verl_data.close_graders()


def test_compute_score_grades_in_the_sandbox(graders: None) -> None:
    row = verl_rows(TASKS[:1], reward_mode="binary")[0]
    truth, extra = row["reward_model"]["ground_truth"], row["extra_info"]
    right = compute_score(row["data_source"], "x + 1", truth, extra)
    assert right["score"] == 1.0 and right["verdict"] == "pass"
    wrong = compute_score(row["data_source"], "```python\nx * 3\n```", truth, extra)
    assert wrong["score"] == 0.0 and wrong["pass_rate"] < 1.0
    partial = compute_score(row["data_source"], "x + 1 if x < 3 else 0", truth, {**extra, "reward_mode": "fraction"})
    assert 0.0 < partial["score"] < 1.0  # right on the shown inputs and the negative hidden ones only
    # verl's tool agent loop: the response holds the tools' outputs too; the model's own submission is
    # graded, never a code block a tool printed (it had scored 1.0; a submitted right answer, 0)
    submitted = ('<tool_call>\n{"name": "submit", "arguments": {"code": "x + 1"}}\n</tool_call>\nuser\n'
                 "<tool_response>\nsubmitted\n</tool_response>\nassistant\nI submitted it.")  # fmt: skip
    assert compute_score(row["data_source"], submitted, truth, extra)["score"] == 1.0
    printed = ('<tool_call>\n{"name": "run_code", "arguments": {"code": "print(1)"}}\n</tool_call>\nuser\n'
               "<tool_response>\nstdout:\n```python\nx + 1\n```\n</tool_response>\nassistant\nDone.")  # fmt: skip
    assert compute_score(row["data_source"], printed, truth, extra)["score"] == 0.0
    cut = "```python\nx * 3\n```<tool_response>\n```python\nx + 1\n```"  # a response cut inside a tool's output
    assert compute_score(row["data_source"], cut, truth, extra)["score"] == 0.0
    with pytest.raises(ValueError, match="not a dojo task"):
        compute_score("dojo", "x", "42")
    with pytest.raises(ValueError, match="reward_mode"):
        compute_score("dojo", "x", truth, {"reward_mode": "lenient"})


def test_a_sandbox_failure_raises_instead_of_scoring_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    dead = DojoReward(grading=GradingConfig(mode="fraction"))
    dead._grader = Grader(DeadSandbox(), GradingConfig(mode="fraction"))  # type: ignore[arg-type]
    monkeypatch.setattr(verl_data, "_grader", lambda mode: dead)
    truth = verl_rows(TASKS[:1])[0]["reward_model"]["ground_truth"]
    with pytest.raises(RewardUnavailable, match="failed 3 times"):
        compute_score("dojo", "x + 1", truth)
    dead.close()


def test_parquet_export_is_verl_row_schema(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    path = tmp_path / "train.parquet"
    assert export_verl_parquet(TASKS, path, agent_name="dojo_feedback") == 2
    rows = pq.read_table(path).to_pylist()
    assert {"data_source", "prompt", "ability", "reward_model", "extra_info", "agent_name"} <= set(rows[0])
    first = rows[0]
    assert first["prompt"] == [dict(m) for m in TASKS[0].messages()] and first["ability"] == "code"
    assert first["reward_model"]["style"] == "rule"
    assert Task.model_validate_json(first["reward_model"]["ground_truth"]) == TASKS[0]
    assert first["extra_info"]["index"] == 0 and first["extra_info"]["task_id"] == TASKS[0].id
    assert set(first["extra_info"]["tools_kwargs"]) == {"run_code", "run_tests", "submit"}
    hidden = [str(t.expected) for t in TASKS[0].tests if not t.visible]
    assert not any(f"== {h}\n" in first["prompt"][-1]["content"] for h in hidden if h not in "0123")
    with pytest.raises(ValueError, match="no tasks"):
        export_verl_parquet([], tmp_path / "empty.parquet")


_reports: dict[Path, dict[str, Any]] = {}


def _verl_script(tiny_model_dir: Path) -> dict[str, Any]:
    """What verl_script.py reports (run once per model, in a subprocess with verl's classes)."""
    if tiny_model_dir not in _reports:
        # the repository first: verl's wheel ships a top-level ``tests`` package too
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(VERL_DEPS)])}
        proc = subprocess.run(
            [sys.executable, str(Path(__file__).with_name("verl_script.py")), str(tiny_model_dir)],
            capture_output=True, text=True, timeout=300, env=env, cwd=ROOT,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-3000:]
        _reports[tiny_model_dir] = json.loads(proc.stdout.strip().splitlines()[-1])
    return _reports[tiny_model_dir]


@pytest.mark.skipif(not VERL_DEPS.is_dir(), reason="verl's classes are not installed (make test installs .verl-deps)")
def test_tool_and_agent_loop_against_verl_classes(tiny_model_dir: Path) -> None:
    report = _verl_script(tiny_model_dir)
    assert report["tool_is_base_tool"] and report["loop_is_agent_loop_base"] and report["registered"]
    assert report["schema_names"] == ["run_code", "submit"]
    assert report["tool_names"] == ["run_code", "run_tests", "submit"]
    assert report["observations"][0].startswith("verdict: Accepted") and "42" in report["observations"][0]
    assert report["calc_reward"] == 1.0  # the session kept the submission across create/release
    assert report["output_is_agent_loop_output"] and report["lengths_match"]
    assert report["turns"] == 2 and report["server_calls"] == 2  # the random model failed, got feedback, retried
    assert report["mask_zeros"] > 0 and "did not pass the visible tests" in report["env_text"]
    assert 0.0 <= report["reward_score"] <= 1.0
    assert "rm_scores" in report["as_dict_keys"]
    assert len(report["turn_scores"]) == 2  # one per turn, by the default process config


@pytest.mark.skipif(not VERL_DEPS.is_dir(), reason="verl's classes are not installed (make test installs .verl-deps)")
def test_agent_loop_turn_scores_are_the_episode_runners_process_rewards(tiny_model_dir: Path) -> None:
    report = _verl_script(tiny_model_dir)
    assert report["shipped_process"] == {"progress_weight": 1.0, "repeat_penalty": 0.2, "malformed_penalty": 0.2}
    assert report["scripted_turns"] == 4 and report["scripted_reward"] == 1.0
    # progress on the visible tests (0, +1/2, -1/2, +1), the repeated failing reply (-0.3) and the
    # served process reward model's step score (0.5 x 1 on the right body)
    assert report["scripted_turn_scores"] == pytest.approx([0.0, 0.5, -0.8, 1.5])
    assert report["runner_turn_scores"] == pytest.approx(report["scripted_turn_scores"])
    assert report["off_turns"] == 4 and report["off_turn_scores"] == []  # process: false


@pytest.mark.skipif(not VERL_DEPS.is_dir(), reason="verl's classes are not installed (make test installs .verl-deps)")
def test_the_agent_loop_grades_only_a_reply_it_trains_on(tiny_model_dir: Path) -> None:
    """A first reply and its feedback that fill the response: the loop asked for a second reply,
    graded it (right: 1.0) and cut its tokens off, so the wrong first reply trained with reward 1.0."""
    report = _verl_script(tiny_model_dir)
    filled, cut = report["budget_64"], report["budget_4"]
    assert filled["turns"] == 1 and filled["graded"] == "x * 3" == filled["trained"] and filled["score"] == 0.0
    assert filled["length"] == 64
    assert cut["turns"] == 1 and cut["length"] == 4 and cut["graded"] == cut["trained"] != "x * 3"
    assert cut["score"] == 0.0
