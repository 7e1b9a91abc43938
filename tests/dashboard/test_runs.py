"""A run as the dashboard reads it: incrementally, shard by shard, into the figures the page shows."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from dojo.dashboard import RunLocation, RunView
from dojo.errors import InputError
from dojo.rollout.store import STALE_PARTIAL_S, TrajectoryStore
from tests.dashboard.written_runs import write_groups, write_metrics


def test_a_train_directory_a_store_and_a_run_not_started_yet_are_runs(tmp_path: Path) -> None:
    (tmp_path / "train").mkdir()
    write_metrics(tmp_path / "train", 2)
    loc = RunLocation.parse(str(tmp_path / "train"))
    assert loc.train_dir == tmp_path / "train" and loc.store_url == str(tmp_path / "train" / "trajectories")
    store = tmp_path / "store"
    write_groups(TrajectoryStore(str(store)), 1)
    assert RunLocation.parse(f"mine={store}") == RunLocation("mine", str(store))
    later = RunLocation.parse(str(tmp_path / "later"))  # a run about to write: waited for
    assert later.train_dir == tmp_path / "later"
    assert RunLocation.parse("s3://bucket/runs/a").store_url == "s3://bucket/runs/a"


def test_what_is_no_run_says_what_was_expected(tmp_path: Path) -> None:
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.txt").write_text("x")
    with pytest.raises(InputError, match="neither a run directory"):
        RunLocation.parse(str(tmp_path / "notes"))
    with pytest.raises(InputError, match="is a file"):
        RunLocation.parse(str(tmp_path / "notes" / "a.txt"))
    with pytest.raises(InputError, match="names no run"):
        RunLocation.parse("name=")


def test_refresh_reads_only_new_shards_and_the_figures_follow(tmp_path: Path) -> None:
    store = TrajectoryStore(str(tmp_path / "run" / "trajectories"))
    view = RunView(RunLocation.parse(str(tmp_path / "run")))
    assert view.refresh() == 0 and view.summary()["episodes"] == 0  # nothing written yet: no error
    write_groups(store, 3, size=4, pass_every=2)  # 12 episodes, half pass
    assert view.refresh() == 12 and view.refresh() == 0
    s = view.summary()
    assert (s["episodes"], s["groups"], s["pass_rate"], s["mean_reward"], s["hack_rate"]) == (12, 3, 0.5, 0.5, 0.0)
    write_groups(store, 2, size=4, hack=True)
    write_groups(store, 1, size=4, status="infra_error")
    assert view.refresh() == 12
    s = view.summary()
    assert s["episodes"] == 24 and s["hack_rate"] == pytest.approx(8 / 20)  # of the scored and the hacked
    assert s["infra_failure_rate"] == pytest.approx(4 / 24)
    last = view.window(3)  # the last three groups: two hacked, one lost to infra
    assert last["hack_rate"] == 1.0 and last["infra_failure_rate"] == pytest.approx(4 / 12)


def test_curves_pool_episodes_in_order_and_split_by_level(tmp_path: Path) -> None:
    store = TrajectoryStore(str(tmp_path / "s"))
    write_groups(store, 5, size=4, pass_every=1, difficulty=0.2)  # all pass at level 0.2
    write_groups(store, 5, size=4, pass_every=4, difficulty=0.8)  # a quarter pass at 0.8
    view = RunView(RunLocation.parse(str(tmp_path / "s")))
    view.refresh()
    curves = view.curves()["by_episode"]
    assert curves["x"][-1] == 40 and len(curves["x"]) == 20  # windows of 2 episodes: 20 points
    assert curves["pass_rate"][0] == 1.0 and curves["pass_rate"][-1] in (0.0, 1.0)
    levels = curves["pass_rate_by_level"]
    assert set(levels) == {"0.2", "0.8"}
    at_02 = [v for v in levels["0.2"] if v is not None]
    at_08 = [v for v in levels["0.8"] if v is not None]
    assert len(at_02) == 10 and sum(at_02) == 10 and len(at_08) == 10 and sum(at_08) == 2.5
    assert curves["tool_calls"][0] == 1.0 and curves["turns"][0] == 2.0
    assert curves["policy_share"][0] == pytest.approx(0.6, abs=0.01)


def test_slowest_search_and_one_episode_in_full(tmp_path: Path) -> None:
    store = TrajectoryStore(str(tmp_path / "s"))
    write_groups(store, 2, size=2, wall=1.0)
    slow = write_groups(store, 1, size=2, wall=30.0, hack=True)
    view = RunView(RunLocation.parse(str(tmp_path / "s")))
    view.refresh()
    top = view.slowest(2)
    assert [e["episode_id"] for e in top["episodes"]] == [slow[1].episode_id, slow[0].episode_id]
    assert top["groups"][0]["group_id"] == slow[0].group_id and top["groups"][0]["wall_seconds"] == pytest.approx(30.01)
    hacked = view.search(flag="hack:")
    assert {e["episode_id"] for e in hacked} == {ep.episode_id for ep in slow}
    assert [e["task_id"] for e in view.search(task="task-1")] == ["task-1", "task-1"]
    assert [(e["task_id"], e["verdict"]) for e in view.search(verdict="pass", task="task-1")] == [("task-1", "pass")]
    full = view.episode(slow[0].episode_id)
    assert full is not None and full["flags"] == ["hack:exit_before_checks"]
    assert full["turns"][0]["tool_results"][0]["call"]["name"] == "run_code"
    assert full["messages"][0] == {"role": "user", "content": "Write f."}
    assert view.episode("no-such-episode") is None


def test_shards_from_before_the_new_columns_still_read(tmp_path: Path) -> None:
    """Stores written before ``tool_calls`` and ``cases`` existed: those figures are unknown, not 0."""
    store = TrajectoryStore(str(tmp_path / "s"))
    write_groups(store, 2)
    for path in store.shards():
        table = pq.read_table(path)
        pq.write_table(table.drop_columns(["tool_calls", "cases"]), path)
    view = RunView(RunLocation.parse(str(tmp_path / "s")))
    assert view.refresh() == 8
    assert view.curves()["by_episode"]["tool_calls"][0] is None
    assert view.search()[0]["tool_calls"] is None
    for path in store.shards():  # (a foreign shard without num_turns: slowest and search had been a 500)
        pq.write_table(pq.read_table(path).drop_columns(["num_turns"]), path)
    again = RunView(RunLocation.parse(str(tmp_path / "s")))
    assert again.refresh() == 8 and again.search()[0]["turns"] is None and len(again.slowest(3)["episodes"]) == 3


def test_a_reader_never_removes_the_shard_a_live_run_is_writing(tmp_path: Path) -> None:
    """The dashboard's store had removed every ``_tmp-*.partial`` file as it opened a run, and again
    on every refresh after a read error: the shard a live run was writing, whose rename then failed
    (``dojo train`` raised, the shard was lost). And one shard it could not read had hidden all the
    others of the run, for good."""
    root = tmp_path / "s"
    written = write_groups(TrajectoryStore(str(root)), 1, size=4)
    partial = root / "_tmp-shard-1.parquet.partial"
    partial.write_bytes(b"PAR1 being written")
    old = time.time() - STALE_PARTIAL_S - 60  # (old enough that a writer would remove it: a reader must not)
    os.utime(partial, (old, old))
    (root / "shard-0-foreign.parquet").write_bytes(b"not a parquet file")  # listed first
    view = RunView(RunLocation.parse(f"r={root}"))
    for _ in range(3):
        view.refresh()
    assert partial.read_bytes() == b"PAR1 being written"
    assert view.summary()["episodes"] == 4 and "shard-0-foreign.parquet" in (view.error or ""), view.error
    assert view.episode(written[0].episode_id) is not None
    # once readable it takes its place in the run's order (first), not after the shards shown: the
    # alert windows take the last groups as the latest
    other = TrajectoryStore(str(tmp_path / "other"))
    write_groups(other, 1, size=2)
    (root / "shard-0-foreign.parquet").write_bytes(Path(other.shards()[0]).read_bytes())
    view.refresh()
    view.refresh()
    assert view.summary()["episodes"] == 6 and view.error is None
    assert view.search(limit=1)[0]["group_id"] == written[-1].group_id


def test_shards_a_resumed_run_removed_leave_the_view(tmp_path: Path) -> None:
    """``dojo train`` resumed from a checkpoint removes the shards written after it (``drop_newer_shards``):
    they had stayed on the page, and opening one of their episodes was a 500."""
    store = TrajectoryStore(str(tmp_path / "s"))
    kept = write_groups(store, 1, size=4)
    dropped = write_groups(store, 1, size=4)
    view = RunView(RunLocation.parse(str(tmp_path / "s")))
    assert view.refresh() == 8
    store.remove_shard(store.shards()[-1])
    view.refresh()
    assert view.summary()["episodes"] == 4 and view.error is None
    assert view.episode(dropped[0].episode_id) is None and view.episode(kept[0].episode_id) is not None


def test_training_metrics_give_step_curves(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir()
    write_metrics(tmp_path / "run", 4)
    view = RunView(RunLocation.parse(str(tmp_path / "run")))
    view.refresh()
    steps = view.curves()["by_step"]
    assert steps["step"] == [1.0, 2.0, 3.0, 4.0] and steps["reward"] == pytest.approx([0.1, 0.2, 0.3, 0.4])
    assert "loss" not in steps  # a column the run never wrote is no curve


def test_watching_a_run_that_has_not_started_creates_nothing(tmp_path: Path) -> None:
    """``make demo`` starts the dashboard before ``dojo train --out``, which refuses a directory that
    is not empty: the dashboard only reads."""
    view = RunView(RunLocation.parse(str(tmp_path / "demo")))
    assert view.refresh() == 0 and view.error is None
    assert not (tmp_path / "demo").exists()
    assert view.summary()["waiting"] == f"waiting for {tmp_path / 'demo'}: nothing there yet"  # (a typo shows)


def test_a_directory_waited_for_that_a_rollout_writes_is_read_as_its_store(tmp_path: Path) -> None:
    """A path that did not exist was taken as a `dojo train --out` directory, its episodes looked for
    under trajectories/: a `dojo rollout --out` started after the page showed 0 episodes forever."""
    view = RunView(RunLocation.parse(str(tmp_path / "later")))
    assert view.refresh() == 0
    write_groups(TrajectoryStore(str(tmp_path / "later")), 2, size=2)  # a rollout's store: shards at the top
    assert view.refresh() == 4 and view.summary()["waiting"] is None
    assert view.summary()["store"] == str(tmp_path / "later")


def test_the_idle_share_is_the_time_no_episode_was_in_flight() -> None:
    """Two bursts of episodes with a pause between them (a training step): the buckets of the pause
    are idle, the others are not."""
    import numpy as np

    from dojo.dashboard.runs import Episodes, _time_curves

    starts = np.array([0.0, 0.5, 1.0, 1.5, 2.0] * 2) + np.repeat([0.0, 7.0], 5)  # busy 0-3 and 7-10
    eps = Episodes(finished=starts + 1.0, wall=np.ones(10))
    curves = _time_curves(eps)
    assert len(curves["t"]) == 2 and curves["episodes_per_second"] == [1.0, 1.0]  # 5 finish in each 5 s
    assert curves["idle_share"] == pytest.approx([2 / 5, 2 / 5])  # [3, 5) idle, then [5, 7)
