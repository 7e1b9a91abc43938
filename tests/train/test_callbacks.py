"""dojo train's step callback, driven as the trainer drives it (a fake trainer state): metrics.csv
rows, and the judge's agreement with the labels people give while the run trains."""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pandas as pd
import pytest

from dojo.rewards.agreement import AgreementMonitor
from dojo.rewards.review import Label, ReviewItem, append_label, write_items
from dojo.rollout.store import TrajectoryStore
from dojo.train.callbacks import DojoCallback, StepRecorder
from dojo.train.config import ConfigError, build_config

LOGS = {"reward": 0.5, "loss": 0.1, "pass_rate": 0.25}


def callback(out: Path, agreement: AgreementMonitor | None, *, quiet: bool = True) -> DojoCallback:
    store = TrajectoryStore(str(out / "trajectories"))
    return DojoCallback(out, StepRecorder(None), store, total_steps=10, quiet=quiet, agreement=agreement)


def log_step(cb: DojoCallback, step: int) -> None:
    state = SimpleNamespace(global_step=step, max_steps=10)
    cb.on_log(SimpleNamespace(), state, SimpleNamespace(), logs=dict(LOGS))


def judged(review: Path, n: int) -> None:
    """A review set of ``n`` items the judge passed."""
    write_items(review, [ReviewItem(item_id=f"i{k}", text="t", judge_score=0.9, judge_label="pass") for k in range(n)])


def label(review: Path, passes: int, fails: int) -> None:
    for k in range(passes + fails):
        append_label(review, Label(item_id=f"i{k}", label="pass" if k < passes else "fail", labeller="ann"))


def test_without_a_review_set_metrics_have_no_judge_columns(tmp_path: Path) -> None:
    cb = callback(tmp_path, None)
    log_step(cb, 1)
    metrics = pd.read_csv(tmp_path / "metrics.csv")
    assert list(metrics["reward"]) == [0.5] and not any(c.startswith("judge/") for c in metrics.columns)


def test_agreement_on_labels_that_arrive_while_the_run_trains(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    review = tmp_path / "review"  # not there yet when the run starts
    cb = callback(tmp_path, AgreementMonitor(review, threshold=0.8, min_items=4))
    log_step(cb, 1)
    judged(review, 10)
    label(review, passes=3, fails=0)  # fewer than min_items: no alert yet
    log_step(cb, 2)
    label(review, passes=0, fails=6)  # ann now fails i0..i5, which the judge passed
    with caplog.at_level(logging.WARNING, logger="dojo.rewards.agreement"):
        log_step(cb, 3)
    rows = pd.read_csv(tmp_path / "metrics.csv").set_index("step")
    assert list(rows["judge/agreement_items"]) == [0, 3, 6]
    assert pd.isna(rows.loc[1, "judge/agreement"]) and rows.loc[2, "judge/agreement"] == 1.0
    assert rows.loc[3, "judge/agreement"] == 0.0
    assert list(rows["judge/agreement_alert"]) == [0, 0, 1]
    assert "judge agreement 0.000 is below 0.800 on 6 labelled items" in caplog.text


def test_the_progress_line_shows_the_alert(tmp_path: Path) -> None:
    review = tmp_path / "review"
    judged(review, 4)
    label(review, passes=0, fails=4)
    cb = callback(tmp_path, AgreementMonitor(review, threshold=0.5, min_items=4), quiet=False)
    state: Any = SimpleNamespace(global_step=0, max_steps=10)
    cb.on_train_begin(SimpleNamespace(), state, SimpleNamespace())
    try:
        log_step(cb, 1)
        assert cb.progress is not None
        stats = cb.progress.tasks[0].fields["stats"]
    finally:
        cb.on_train_end(SimpleNamespace(), state, SimpleNamespace())
    assert "judge 0.00 on 4" in stats and "JUDGE AGREEMENT LOW" in stats


def test_an_unreadable_label_line_does_not_stop_the_run(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    review = tmp_path / "review"
    judged(review, 4)
    with (review / "labels.jsonl").open("w") as f:
        f.write('{"item_id": "i0", "lab')  # a line still being written
    cb = callback(tmp_path, AgreementMonitor(review))
    with caplog.at_level(logging.WARNING, logger="dojo.rewards.agreement"):
        log_step(cb, 1)
        log_step(cb, 2)
    rows = pd.read_csv(tmp_path / "metrics.csv")
    assert list(rows["judge/agreement_items"]) == [0, 0] and list(rows["judge/agreement_alert"]) == [0, 0]
    assert caplog.text.count("judge agreement not checked") == 1  # once, not at every step


def test_a_resumed_run_keeps_its_metrics_header(tmp_path: Path) -> None:
    log_step(callback(tmp_path, None), 1)
    log_step(callback(tmp_path, AgreementMonitor(tmp_path / "review")), 2)  # the section added on resume
    metrics = pd.read_csv(tmp_path / "metrics.csv")
    assert list(metrics["step"]) == [1, 2] and list(metrics["reward"]) == [0.5, 0.5]


def test_the_config_section(tmp_path: Path) -> None:
    config = build_config({"judge_agreement": {"review_dir": str(tmp_path / "later")}})
    assert config.judge_agreement is not None and config.judge_agreement.threshold == 0.75
    assert build_config({}).judge_agreement is None
    with pytest.raises(ConfigError, match=r"judge_agreement\.threshold: .*between 0 and 1 .*got 75"):
        build_config({"judge_agreement": {"review_dir": "r", "threshold": 75}})
    (tmp_path / "items.jsonl").write_text("")
    with pytest.raises(ConfigError, match=r"judge_agreement\.review_dir: .* is a file"):
        build_config({"judge_agreement": {"review_dir": str(tmp_path / "items.jsonl")}})
    with pytest.raises(ConfigError, match=r"judge_agreement\.min_items"):
        build_config({"judge_agreement": {"review_dir": "r", "min_items": 0}})


def test_a_step_without_a_reward_shows_a_dash_not_a_crash(tmp_path: Path) -> None:
    """A step whose every episode was unscorable (each prompt filled the model's context: SciCode,
    doc_analysis and scene3d prompts against the embedded tiny model) logs no reward; the progress
    line said so by crashing the run."""
    cb = callback(tmp_path, None, quiet=False)
    state: Any = SimpleNamespace(global_step=0, max_steps=10)
    cb.on_train_begin(SimpleNamespace(), state, SimpleNamespace())
    try:
        cb.on_log(SimpleNamespace(), SimpleNamespace(global_step=1, max_steps=10), SimpleNamespace(),
                  logs={"reward": None, "loss": 0.0, "pass_rate": None})  # fmt: skip
        assert cb.progress is not None
        stats = cb.progress.tasks[0].fields["stats"]
    finally:
        cb.on_train_end(SimpleNamespace(), state, SimpleNamespace())
    assert stats.startswith("reward -  pass -")
    assert pd.read_csv(tmp_path / "metrics.csv")["step"].tolist() == [1]
