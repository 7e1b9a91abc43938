"""``dojo train`` end to end on a very small model: outputs, resume after SIGKILL, Ctrl-C, bad input."""

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
from typer.testing import CliRunner

from dojo.cli import app

runner = CliRunner()
SMALL = '{"hidden_size":32,"intermediate_size":64,"num_layers":1,"num_heads":2,"num_kv_heads":1}'


def small(out: Path, steps: int, save_every: int = 2) -> list[str]:
    return ["train", "--out", str(out), "--set", "warm_start.steps=5", "--set", f"grpo.steps={steps}",
            "--set", "grpo.prompts_per_step=2", "--set", "grpo.group_size=4", "--set", "grpo.oversample=1.5",
            "--set", "tasks.train_size=60", "--set", "tasks.held_out_size=8", "--set", "eval.samples=2",
            "--set", f"output.save_every={save_every}", "--set", f"policy.tiny={SMALL}"]  # fmt: skip


def steps_written(out: Path) -> collections.Counter[int]:
    frame = pd.read_parquet(out / "trajectories")
    groups = frame.drop_duplicates("group_id")["group_id"]
    return collections.Counter(int(g.split("/")[0].removeprefix("step")) for g in groups)


def test_train_writes_checkpoints_trajectories_metrics_and_a_report(tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = runner.invoke(app, [*small(out, steps=3), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout[result.stdout.index("{") :])
    assert data["steps"] == 3 and data["before"]["tasks"] == 8 and data["after"]["samples"] == 2
    for name in ("config.yaml", "report.md", "report.json", "reward_curve.png", "final/config.json", "warm-start"):
        assert (out / name).exists(), name
    assert (out / "reward_curve.png").read_bytes()[:4] == b"\x89PNG"
    assert "| held-out mean reward (sampled) |" in (out / "report.md").read_text()
    metrics = pd.read_csv(out / "metrics.csv")
    assert list(metrics["step"]) == [1, 2, 3] and metrics["reward"].between(0, 1).all()
    assert set(metrics["groups_kept"]) == {2} and (metrics["groups_informative"] <= 3).all()
    assert list((out / "tensorboard").glob("events.out.tfevents.*"))
    assert steps_written(out) == {1: 3, 2: 3, 3: 3}  # every generated group of every step, once
    frame = pd.read_parquet(out / "trajectories")
    assert set(frame["status"]) == {"answered"} and frame["reward"].notna().all()
    # the report never trains on a held-out prompt
    held = json.loads((out / "report.json").read_text())["before"]["tasks"]
    assert held == 8


def test_train_on_feedback_episodes_reports_pass_rate_per_reply(tmp_path: Path) -> None:
    """``episode.mode=feedback``: training and held-out episodes run the write-run-fix loop; the
    stored episodes carry the token ids the loss was computed on, and the report shows each reply."""
    out = tmp_path / "fb"
    args = [*small(out, steps=2), "--set", "episode.mode=feedback", "--set", "episode.max_turns=2", "--json",
            "--set", "warm_start.fix_share=0.5"]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout[result.stdout.index("{") :])
    before = data["before"]
    assert len(before["pass_by_turn"]) == 2 and before["pass_by_turn"][0] <= before["pass_by_turn"][1]
    assert 1.0 <= before["mean_turns"] <= 2.0
    report = (out / "report.md").read_text()
    assert "pass within 2 replies" in report and "fixed on reply 2 or later" in report
    metrics = pd.read_csv(out / "metrics.csv")
    assert metrics["turns"].between(1, 2).all()
    frame = pd.read_parquet(out / "trajectories")
    assert frame["num_turns"].max() == 2  # the warm-started model misses often: feedback, then a second reply
    two = frame[frame["num_turns"] == 2].iloc[0]
    assert "did not pass the visible tests" in json.loads(two["messages"])[2]["content"]
    first, second = (list(ids) for ids in two["prompt_token_ids"])
    assert second[: len(first) + len(two["token_ids"][0])] == first + list(two["token_ids"][0])  # one token sequence


def test_train_refuses_bad_input_and_never_overwrites(tmp_path: Path) -> None:
    out = tmp_path / "r"
    bad_set = runner.invoke(app, ["train", "--out", str(out), "--set", "grpo.steps"])
    assert bad_set.exit_code == 2 and "--set takes FIELD=VALUE" in bad_set.output
    bad_field = runner.invoke(app, ["train", "--out", str(out), "--set", "grpo.group_size=1"])
    assert bad_field.exit_code == 2 and "grpo.group_size" in bad_field.output
    missing = runner.invoke(app, ["train", str(tmp_path / "none.yaml")])
    assert missing.exit_code == 2 and "does not exist" in missing.output
    nothing = runner.invoke(app, ["train", "--out", str(tmp_path / "empty"), "--resume"])
    assert nothing.exit_code == 2 and "nothing to resume" in nothing.output
    bad_model = runner.invoke(app, ["train", "--out", str(tmp_path / "m"), "--set", "policy.model=/no/such/model"])
    assert bad_model.exit_code == 2 and "neither `tiny` nor a local Hugging Face model directory" in bad_model.output
    bad_source = runner.invoke(app, ["train", "--out", str(tmp_path / "s"), "--set", "tasks.source=family:nope"])
    assert bad_source.exit_code == 2 and "family" in bad_source.output
    # a Ray cluster that does not answer is said at start (it had failed after the warm start, a traceback)
    no_ray = runner.invoke(app, ["train", "--out", str(tmp_path / "r"), "--set", "sandbox.ray=127.0.0.1:1"])
    assert no_ray.exit_code == 2 and "no Ray cluster answers at 127.0.0.1:1" in " ".join(no_ray.output.split())
    # none left a directory behind (it had held a config.yaml that refused every later start in it)
    assert not (tmp_path / "m").exists() and not (tmp_path / "s").exists() and not (tmp_path / "r").exists()
    (tmp_path / "afile").write_text("x")
    a_file = runner.invoke(app, ["train", "--out", str(tmp_path / "afile")])
    assert a_file.exit_code == 2 and "is a file" in a_file.output
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "config.yaml").write_text("grpo: [\n")
    broken = runner.invoke(app, ["train", "--out", str(tmp_path / "broken"), "--resume"])
    assert broken.exit_code == 2 and "config.yaml is damaged" in broken.output, broken.output
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    taken = runner.invoke(app, small(out, steps=1))
    assert taken.exit_code == 2 and "pass --resume" in taken.output
    assert (out / "keep.txt").read_text() == "mine"
    printed = runner.invoke(app, ["train", "--print-config"])
    assert printed.exit_code == 0 and "grpo:" in printed.stdout
    # a resume with another config names what differs and how to resume with the run's own
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "config.yaml").write_text(printed.stdout)
    other = runner.invoke(app, ["train", "--out", str(tmp_path / "other"), "--resume", "--set", "grpo.steps=7"])
    said = " ".join(other.output.split())
    assert other.exit_code == 2 and "grpo.steps" in said and "(now 7)" in said and "--resume" in said, said


def _wait_for(path_glob: tuple[Path, str], proc: subprocess.Popen[bytes], timeout: float = 240) -> None:
    root, pattern = path_glob
    deadline = time.monotonic() + timeout
    while not list(root.glob(pattern)):
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        assert time.monotonic() < deadline, f"{pattern} did not appear in {timeout} s"
        time.sleep(0.05)


def test_killed_run_resumes_to_the_same_step_count_with_no_lost_trajectories(tmp_path: Path) -> None:
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "dojo.cli", *small(out, steps=6, save_every=2)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _wait_for((out / "grpo", "checkpoint-4/trainer_state.json"), proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (out / "final").exists()
    resumed = subprocess.run([*cmd, "--resume"], capture_output=True, text=True, env=env, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert json.loads((out / "report.json").read_text())["steps"] == 6
    assert steps_written(out) == {s: 3 for s in range(1, 7)}  # each step's groups exactly once


def test_ctrl_c_saves_a_checkpoint_and_resume_finishes(tmp_path: Path) -> None:
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "dojo.cli", *small(out, steps=40, save_every=100)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _wait_for((out, "metrics.csv"), proc)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err.decode()[-3000:]
    ckpts = list((out / "grpo").glob("checkpoint-*"))
    assert len(ckpts) == 1
    step = int(ckpts[0].name.split("-")[1])
    assert 1 <= step < 40 and steps_written(out) == {s: 3 for s in range(1, step + 1)}
    resumed = subprocess.run([*cmd, "--resume", "--set", "grpo.steps=40"], capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert steps_written(out) == {s: 3 for s in range(1, 41)}
