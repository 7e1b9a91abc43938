"""``dojo rollout`` against the tiny model served on loopback: summary, bad input, kill and resume."""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from dojo.cli import app
from tests.agent.scripted import ScriptedPolicy, fixed, served
from tests.sandbox.conftest import SKIP_REASON, requires_sandbox_pytest

runner = CliRunner()
GIVE_UP = "I cannot do this task."
pytestmark = pytest.mark.skipif(bool(SKIP_REASON), reason=SKIP_REASON or "")


def test_rollout_writes_trajectories_and_a_summary(policy_server: str, tmp_path: Path) -> None:
    out, summary = tmp_path / "run", tmp_path / "summary.json"
    args = ["rollout", "family:expressions?n=4", "--policy", policy_server, "--out", str(out), "-n", "2",
            "--max-turns", "2", "--max-tokens", "16", "--json", str(summary)]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "pass@1" in result.output and "pass@2" in result.output
    data = json.loads(summary.read_text())
    assert data["groups"] == 4 and data["episodes"] == 8 and data["pass@1"] is not None
    assert sum(data["verdicts"].values()) == 8 and data["completion_tokens"] > 0
    df = pd.read_parquet(out)
    assert sorted(df["episode_id"]) == sorted(f"expressions/0/{i}#{s}" for i in range(4) for s in range(2))
    assert df["token_ids"].map(len).min() >= 1  # every episode recorded its turns' token ids


def test_rollout_refuses_bad_input(policy_server: str, tmp_path: Path) -> None:
    base = ["rollout", "family:expressions?n=2&seed=0", "--policy", policy_server, "--out", str(tmp_path / "r")]
    bad_mode = runner.invoke(app, [*base, "--mode", "chaos"])
    assert bad_mode.exit_code == 2 and "--mode must be feedback or tools" in bad_mode.output
    bad_source = runner.invoke(app, ["rollout", "nope", "--policy", policy_server, "--out", str(tmp_path / "r")])
    assert bad_source.exit_code == 2 and "unknown task source" in bad_source.output
    bad = ["rollout", "family:expressions?n=2", "--policy", str(tmp_path), "--out", str(tmp_path / "x")]
    bad_policy = runner.invoke(app, bad)
    assert bad_policy.exit_code == 2 and "neither an http(s) URL" in bad_policy.output
    assert not (tmp_path / "x").exists()  # (a bad --policy made --out before it was refused)
    down = runner.invoke(app, ["rollout", "family:expressions?n=2", "--policy", "http://127.0.0.1:9/v1",
                               "--out", str(tmp_path / "down")])  # fmt: skip
    assert down.exit_code == 2 and "cannot list models at http://127.0.0.1:9/v1" in down.output
    assert not list((tmp_path / "down").glob("shard-*"))
    assert runner.invoke(app, [*base, "--max-tokens", "4", "-n", "1"]).exit_code == 0
    again = runner.invoke(app, [*base, "--max-tokens", "4", "-n", "1"])
    assert again.exit_code == 2 and "pass --resume" in again.output  # nothing is overwritten
    # a resume with other settings had mixed group sizes and modes into one store and one pass@k table
    other = runner.invoke(app, [*base, "--max-tokens", "4", "-n", "2", "--mode", "tools", "--resume"])
    assert other.exit_code == 2 and "other settings" in other.output and "samples 1 (now 2)" in other.output
    assert runner.invoke(app, [*base, "--max-tokens", "4", "-n", "1", "--resume"]).exit_code == 0
    # the same source spelled otherwise is the same run (it had been refused as another source)
    respelled = ["rollout", "family:expressions?seed=0&n=2", *base[2:], "--max-tokens", "4", "-n", "1", "--resume"]
    assert runner.invoke(app, respelled).exit_code == 0
    other_seed = ["rollout", "family:expressions?n=2&seed=1", *base[2:], "--max-tokens", "4", "-n", "1", "--resume"]
    elsewhere = runner.invoke(app, other_seed)
    assert elsewhere.exit_code == 2 and "source 'family:expressions?n=2&seed=0' (now" in elsewhere.output
    (tmp_path / "afile").write_text("x")
    on_file = runner.invoke(app, [*base[:-1], str(tmp_path / "afile")])
    assert on_file.exit_code == 2 and "is a file" in on_file.output
    json_dir = runner.invoke(app, [*base[:-1], str(tmp_path / "new"), "--json", str(tmp_path)])
    assert json_dir.exit_code == 2 and "--json" in json_dir.output and not (tmp_path / "new").exists()


def test_killed_rollout_resumes_with_every_episode_exactly_once(policy_server: str, tmp_path: Path) -> None:
    out = tmp_path / "run"
    n_tasks, samples = 30, 2
    cmd = [sys.executable, "-m", "dojo.cli", "rollout", f"family:expressions?n={n_tasks}", "--policy", policy_server,
           "--out", str(out), "-n", str(samples), "--max-tokens", "48", "--shard-groups", "1",
           "--groups-in-flight", "2", "--policy-concurrency", "1"]  # fmt: skip
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    deadline = time.monotonic() + 120
    while len(list(out.glob("shard-*.parquet"))) < 3:
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        assert time.monotonic() < deadline, "no shard was written in 120 s"
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = pd.read_parquet(out)
    assert 0 < before["group_id"].nunique() < n_tasks  # killed mid-way

    resumed = subprocess.run([*cmd, "--resume"], capture_output=True, text=True, env=env, timeout=300)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "resuming" in resumed.stderr  # progress and notes on stderr, results on stdout
    after = pd.read_parquet(out)
    counts = collections.Counter(after["episode_id"])
    expected = {f"expressions/0/{i}#{s}" for i in range(n_tasks) for s in range(samples)}
    assert set(counts) == expected and set(counts.values()) == {1}  # all present, none twice
    assert after["run_id"].nunique() == 2


@requires_sandbox_pytest
@pytest.mark.parametrize("mode", ["feedback", "tools"])
def test_rollout_runs_repo_tasks(tmp_path: Path, mode: str) -> None:
    """swe: tasks go through the same rollout: episodes recorded, each graded (or not) on the tree.
    (A scripted server: the tiny model's 1,024 positions hold no repo task's prompt.)"""
    out, summary = tmp_path / "run", tmp_path / "summary.json"
    with served(fixed(GIVE_UP)) as url:
        args = ["rollout", "swe:toolz?n=2&seed=4", "--policy", url, "--out", str(out), "-n", "1",
                "--mode", mode, "--max-turns", "2", "--max-tokens", "16", "--json", str(summary)]  # fmt: skip
        result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    data = json.loads(summary.read_text())
    assert data["groups"] == 2 and data["episodes"] == 2
    assert sum(data["verdicts"].values()) == 2  # a reply without edits: no_answer
    assert set(pd.read_parquet(out)["task_id"]) <= {f"swe:toolz/{i:04d}" for i in range(100)}


@pytest.mark.parametrize(
    "source",
    [
        "bfcl:simple_python?n=2",
        "bfcl:simple_java?n=2",
        "bfcl:multi_turn_miss_func?n=2",
        "tau2:retail?n=2",
        "tau2:telecom?n=2",
        "family:terminal?n=2",
        "family:ops?n=2",
        "intercode:bash?n=2",
        "intercode:sql?n=2",
        "family:sql?n=2",
    ],
)
def test_rollout_runs_the_other_agent_sources(tmp_path: Path, source: str) -> None:
    # (a scripted server: with their tools, these prompts are longer than the tiny model's context)
    out, summary = tmp_path / "run", tmp_path / "summary.json"
    with served(fixed(GIVE_UP)) as url:
        args = ["rollout", source, "--policy", url, "--out", str(out), "-n", "1", "--mode", "tools",
                "--max-turns", "2", "--max-tokens", "16", "--json", str(summary)]  # fmt: skip
        result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    data = json.loads(summary.read_text())
    assert data["groups"] == 2 and data["episodes"] == 2 and sum(data["verdicts"].values()) == 2


def test_a_prompt_past_the_models_context_is_left_out_and_said(policy_server: str, tmp_path: Path) -> None:
    """The tiny model's server refuses a prompt past its 1,024 positions as vLLM does (a 400); the
    episode has no reply to grade and a retry would end the same way: not stored, and said why
    (it had been graded on an empty reply, as if the model had answered nothing)."""
    out, summary = tmp_path / "run", tmp_path / "summary.json"
    args = ["rollout", "tau2:retail?n=1", "--policy", policy_server, "--out", str(out), "-n", "1", "--mode", "tools",
            "--max-turns", "2", "--max-tokens", "16", "--json", str(summary)]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    data = json.loads(summary.read_text())
    assert data["groups"] == 0 and data["failures"] == {"prompt_too_long": 1} and not data["retries"], data
    assert "do not fit the model's context" in result.output and "--resume" not in result.output


def test_a_first_request_the_server_refuses_is_said_with_its_reason(tmp_path: Path) -> None:
    """A server option missing refuses every task's first request (a 400): not retried, not stored,
    and the server's own words are shown (it was retried as a server failure, with --resume advised)."""
    out, summary = tmp_path / "run", tmp_path / "summary.json"
    with served(fixed(ValueError('"auto" tool choice requires --enable-auto-tool-choice'))) as url:
        args = ["rollout", "family:expressions?n=2", "--policy", url, "--out", str(out), "-n", "1",
                "--json", str(summary)]  # fmt: skip
        result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    data = json.loads(summary.read_text())
    assert data["failures"] == {"prompt_refused": 2} and not data["retries"] and data["groups"] == 0, data
    assert "--enable-auto-tool-choice" in result.output and "--resume" not in result.output


def test_rollout_with_a_served_user(tmp_path: Path) -> None:
    """tau2 with a user model on a server of its own (scripted servers: the tiny model's 1,024
    positions hold neither side's prompt, and a user brief past its model's context is left out)."""
    out, summary = tmp_path / "run", tmp_path / "summary.json"
    customer = ScriptedPolicy(lambda _m, i: "Hi, I need help with my order." if i == 0 else "Thanks. ###STOP###")
    with served(fixed(GIVE_UP)) as agent, served(customer) as user:
        args = ["rollout", "tau2:retail?n=1", "--policy", agent, "--user-policy", user, "--out", str(out), "-n", "1",
                "--mode", "tools", "--max-turns", "3", "--max-tokens", "16", "--json", str(summary)]  # fmt: skip
        result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    data = json.loads(summary.read_text())
    assert len(customer.calls) == 2  # its first line, and its last
    assert data["episodes"] == 1 and sum(data["verdicts"].values()) == 1
