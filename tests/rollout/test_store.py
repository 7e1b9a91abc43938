"""The trajectory store: atomic shards, resume, and loading with pandas and datasets."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pandas as pd
import pytest

from dojo.agent.episode import EpisodeConfig, EpisodeRunner
from dojo.errors import InputError
from dojo.rewards import Grader
from dojo.rollout import SCHEMA, TrajectoryStore, summarise
from dojo.rollout.store import STALE_PARTIAL_S
from tests.agent.scripted import RIGHT, WRONG, double_task, fixed, tool


async def _episodes(grader: Grader, task_id: str, n: int = 2) -> list:  # type: ignore[type-arg]
    policy = fixed(tool("run_code", code="print(1)"), RIGHT)
    runner = EpisodeRunner(policy, grader, EpisodeConfig(mode="tools", max_turns=2))
    return [await runner.run(double_task(task_id), sample_index=i) for i in range(n)]


async def test_round_trip_through_pandas_and_datasets(grader: Grader, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    store = TrajectoryStore(str(tmp_path / "run"), run_id="r1")
    eps = await _episodes(grader, "a")
    shard = store.write_groups([(double_task("a"), eps)])
    assert shard is not None and Path(shard).name.startswith("shard-")
    assert store.completed_groups() == {"a"}

    df = pd.read_parquet(tmp_path / "run")
    assert list(df.columns) == SCHEMA.names and len(df) == 2
    # every column is documented where users read the schema (docs/rollout.md's table)
    table = (Path(__file__).resolve().parents[2] / "docs" / "rollout.md").read_text().split("Schema (one row")[1]
    documented = {
        name for row in table.splitlines() if row.startswith("| `") for name in row.split("|")[1].split("`")[1::2]
    }
    assert set(SCHEMA.names) <= documented, set(SCHEMA.names) - documented
    row = df.iloc[0]
    assert row["run_id"] == "r1" and row["reward"] == 1.0 and row["verdict"] == "pass" and row["num_turns"] == 2
    messages = json.loads(row["messages"])
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert json.loads(row["prompt"]) == messages[:2]  # the conversation before the first reply
    turns = json.loads(row["turns"])
    assert turns[0]["tool_results"][0]["call"]["name"] == "run_code"

    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf-cache"))
    import datasets

    ds = datasets.load_dataset("parquet", data_files=f"{tmp_path / 'run'}/*.parquet", split="train")
    assert ds.num_rows == 2 and set(ds.column_names) == set(SCHEMA.names)


async def test_a_crashed_write_leaves_nothing_behind(grader: Grader, tmp_path: Path) -> None:
    root = tmp_path / "run"
    store = TrajectoryStore(str(root))
    store.write_groups([(double_task("a"), await _episodes(grader, "a"))])
    partial = root / "_tmp-shard-123.parquet.partial"
    partial.write_bytes(b"PAR1 half a shard")  # killed mid-write
    assert store.completed_groups() == {"a"}
    assert len(pd.read_parquet(root)) == 2  # readers skip the partial file
    TrajectoryStore(str(root))  # a young one may be another writer's shard in the writing: left alone
    TrajectoryStore(str(root), read_only=True)
    assert partial.exists()
    old = time.time() - STALE_PARTIAL_S - 60
    os.utime(partial, (old, old))
    TrajectoryStore(str(root), read_only=True)  # a reader removes nothing
    assert partial.exists()
    again = TrajectoryStore(str(root))  # a resumed run cleans up what its killed writer left
    assert not list(root.glob("_tmp-*")) and again.completed_groups() == {"a"}
    with pytest.raises(InputError, match="read_only"):
        TrajectoryStore(str(root), read_only=True).write_groups([(double_task("b"), await _episodes(grader, "b"))])


async def test_any_fsspec_url_works(grader: Grader) -> None:
    store = TrajectoryStore("memory://dojo-test/run1")
    store.write_groups([(double_task("a"), await _episodes(grader, "a", 1))])
    store.write_groups([(double_task("b"), await _episodes(grader, "b", 1))])
    assert len(store.shards()) == 2 and store.completed_groups() == {"a", "b"}
    assert TrajectoryStore("memory://dojo-test/run1").read().num_rows == 2


def test_bad_url_is_refused() -> None:
    with pytest.raises(ValueError, match="directory or fsspec URL"):
        TrajectoryStore("")


async def test_summary_pass_at_k(grader: Grader, tmp_path: Path) -> None:
    store = TrajectoryStore(str(tmp_path / "run"))
    runner = EpisodeRunner(fixed(RIGHT, WRONG, WRONG, WRONG), grader)
    eps = [await runner.run(double_task("a"), sample_index=i) for i in range(4)]
    store.write_groups([(double_task("a"), eps)])
    s = summarise(store.rows(), ks=(1, 2, 4))
    assert s["pass@1"] == pytest.approx(0.25) and s["pass@2"] == pytest.approx(0.5) and s["pass@4"] == 1.0
    assert s["verdicts"] == {"pass": 1, "fail": 3} and s["episodes"] == 4  # (WRONG passes a shown test only)
