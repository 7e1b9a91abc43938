"""Trajectories, checkpoints and reports on a real S3 API (moto's server, on loopback)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pandas as pd
import pytest

from dojo.errors import InputError
from dojo.rewards import Grader
from dojo.rollout.mirror import MANIFEST, mirror_dir, read_manifest
from dojo.rollout.store import TrajectoryStore
from tests.agent.scripted import RIGHT, double_task, fixed
from tests.conftest import free_port

BUCKET = "dojo-runs"


@pytest.fixture(scope="module")
def s3() -> Iterator[str]:
    """An S3 API server on 127.0.0.1 with one bucket; the AWS_* variables point every client at it."""
    import boto3
    import fsspec.asyn
    from moto.server import ThreadedMotoServer

    # s3fs runs on fsspec's one loop thread per process, whose executor (a lookup of the endpoint's
    # address) lives as long as that loop: named, the leak check knows it as fsspec's (tests/leaks.py).
    loop = fsspec.asyn.get_loop()
    executor = ThreadPoolExecutor(thread_name_prefix="fsspecIO-executor")
    loop.call_soon_threadsafe(loop.set_default_executor, executor)
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    env = {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
    }
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    boto3.client("s3").create_bucket(Bucket=BUCKET)
    try:
        yield env["AWS_ENDPOINT_URL"]
    finally:
        server.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


async def _group(grader: Grader, task_id: str) -> tuple:  # type: ignore[type-arg]
    from dojo.agent.episode import EpisodeConfig, EpisodeRunner

    runner = EpisodeRunner(fixed(RIGHT), grader, EpisodeConfig(mode="feedback", max_turns=1))
    return double_task(task_id), [await runner.run(double_task(task_id), sample_index=i) for i in range(2)]


async def test_shards_round_trip_through_s3(s3: str, grader: Grader) -> None:
    url = f"s3://{BUCKET}/round-trip"
    store = TrajectoryStore(url, run_id="s3")
    store.write_groups([await _group(grader, "a")])
    store.write_groups([await _group(grader, "b")])
    again = TrajectoryStore(url)  # a resumed run, or a reader on another machine
    assert again.completed_groups() == {"a", "b"} and len(again.shards()) == 2
    df = pd.read_parquet(url, storage_options={"client_kwargs": {"endpoint_url": s3}})
    assert len(df) == 4 and set(df["reward"]) == {1.0}


def test_a_missing_bucket_is_a_clear_error(s3: str) -> None:
    with pytest.raises(InputError, match=r"bucket 'no-such-bucket' .* does not exist"):
        TrajectoryStore("s3://no-such-bucket/run")
    with pytest.raises(InputError, match="does not exist"):
        mirror_dir(Path("."), "s3://no-such-bucket/run")
    from dojo.train.config import TrainConfig
    from dojo.train.run import prepare_output

    config = TrainConfig.model_validate(
        {"output": {"dir": "/nonexistent/never-made", "mirror": "s3://no-such-bucket/r"}}
    )
    with pytest.raises(InputError, match="does not exist"):
        prepare_output(config, resume=False)  # refused before anything is written


async def test_a_writer_killed_mid_shard_loses_nothing_committed_and_shows_nothing_half_written(
    s3: str, grader: Grader
) -> None:
    import boto3

    url = f"s3://{BUCKET}/killed"
    TrajectoryStore(url).write_groups([await _group(grader, "kept")])
    # A second writer starts a 12 MB shard (a multipart upload) and is SIGKILLed after its first part.
    script = textwrap.dedent(f"""
        import os, signal
        import s3fs.core
        from dojo.rollout.store import TrajectoryStore
        store = TrajectoryStore({url!r}, storage_options={{"default_block_size": 5 << 20}})  # parts of 5 MiB
        row = store.read().to_pylist()[0]
        rows = [dict(row, group_id="lost", episode_id=f"lost#{{i}}", final=os.urandom(24_000).hex())
                for i in range(250)]
        upload = s3fs.core.S3File._upload_chunk
        def upload_then_die(self, final=False):
            done = upload(self, final)
            if self.parts:
                os.kill(os.getpid(), signal.SIGKILL)
            return done
        s3fs.core.S3File._upload_chunk = upload_then_die
        store.write(rows)
        print("the write finished: the kill did not happen")
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == -9, proc.stdout + proc.stderr
    uploads = boto3.client("s3").list_multipart_uploads(Bucket=BUCKET, Prefix="killed/").get("Uploads", [])
    assert len(uploads) == 1  # it died mid-shard, with parts uploaded
    store = TrajectoryStore(url)
    assert store.completed_groups() == {"kept"} and len(store.shards()) == 1  # nothing half-visible
    store.write_groups([await _group(grader, "after")])  # and the run goes on
    assert store.completed_groups() == {"kept", "after"}


def test_a_run_directory_is_mirrored_with_a_manifest_written_last(s3: str, tmp_path: Path) -> None:
    run = tmp_path / "run"
    (run / "grpo" / "checkpoint-1").mkdir(parents=True)
    (run / "grpo" / "checkpoint-1" / "model.safetensors").write_bytes(b"w" * 1000)
    (run / "report.md").write_text("# report")
    url = f"s3://{BUCKET}/mirror"
    assert mirror_dir(run, url) == {"grpo/checkpoint-1/model.safetensors": 1000, "report.md": 8}
    (run / "grpo" / "checkpoint-2").mkdir()
    (run / "grpo" / "checkpoint-2" / "model.safetensors").write_bytes(b"v" * 2000)
    mirror_dir(run, url)
    files = read_manifest(url)
    assert files["grpo/checkpoint-2/model.safetensors"] == 2000 and len(files) == 3
    import s3fs

    fs = s3fs.S3FileSystem()
    assert fs.cat(f"{BUCKET}/mirror/grpo/checkpoint-2/model.safetensors") == b"v" * 2000
    assert fs.exists(f"{BUCKET}/mirror/{MANIFEST}")
