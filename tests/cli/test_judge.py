"""``dojo judge``: a run's judged items drawn, agreement with the truth recovered, clear errors."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from dojo.cli import app
from dojo.rewards.outcome import Reward
from tests.rewards.judged_runs import judged_store
from tests.rewards.spot_check_run import flipped_agreement, position_flips

runner = CliRunner()


async def test_agreement_recovers_a_judges_known_error_rate(tmp_path: Path) -> None:
    result = await flipped_agreement(tmp_path, 300, 0.15)
    assert result["items"] == 300
    assert abs(result["disagreement"] - 0.15) < 0.05  # (1,000 items within 3 points: bench/judge_agreement.py)
    assert 0.5 < result["cohen_kappa"] < 0.85
    assert (tmp_path / "calibration.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


async def test_a_judge_that_prefers_the_first_answer_is_caught_every_time() -> None:
    assert await position_flips(40) == 1.0


def test_sample_draws_at_the_rate_and_refuses_bad_input(tmp_path: Path) -> None:
    rewards = [Reward(value=0.8, verdict="pass", components={"judge": 0.8}) for _ in range(50)]
    judged_store(tmp_path / "run", ["text"] * 50, rewards)
    out = runner.invoke(app, ["judge", "sample", str(tmp_path / "run"), "--rate", "0.2", "--out", str(tmp_path / "r")])
    assert out.exit_code == 0 and "drew" in out.output
    lines = (tmp_path / "r" / "items.jsonl").read_text().splitlines()
    assert 3 <= len(lines) <= 20
    again = runner.invoke(app, ["judge", "sample", str(tmp_path / "run"), "--out", str(tmp_path / "r")])
    assert again.exit_code == 2 and "exists" in again.output
    bad = runner.invoke(app, ["judge", "sample", str(tmp_path / "run"), "--rate", "2", "--out", str(tmp_path / "x")])
    assert bad.exit_code == 2 and "--rate" in bad.output
    empty = runner.invoke(app, ["judge", "sample", str(tmp_path / "none"), "--out", str(tmp_path / "y")])
    assert empty.exit_code == 2 and "no trajectories" in empty.output
    assert not (tmp_path / "none").exists()  # (a reader's store had made the directory it was asked to read)
    unlabelled = runner.invoke(app, ["judge", "agreement", str(tmp_path / "r")])
    said = unlabelled.output.replace("\n", "")
    assert unlabelled.exit_code == 2 and "has no labels yet" in said and "dojo judge label" in said, said
