"""The trajectory store: finished groups of episodes as Parquet shards on any fsspec filesystem.

Layout: ``<url>/shard-<time>-<random>.parquet``, one shard per ``write`` call, each holding whole
groups (a GRPO group is never split). A shard becomes visible atomically: on a local disk it is
written as ``_tmp-<name>.partial`` (ignored by readers) and renamed into place; on object stores
(``s3://``, ``gs://``, ...) an object appears only when its PUT, or its multipart upload, completes;
a writer killed mid-shard leaves at most an incomplete multipart upload, which no listing shows
(expire them with a bucket lifecycle rule). A crash therefore loses at most the shard being
written and never leaves a half shard or a duplicate; ``completed_groups()`` tells a resumed run what to skip.

Read it back with ``pandas.read_parquet(url)`` or ``datasets.load_dataset("parquet",
data_files=f"{url}/*.parquet")``. The schema is ``SCHEMA`` (documented in docs/rollout.md).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import uuid
from collections.abc import Iterable, Iterator
from typing import Any

import fsspec
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dojo.agent.episode import Episode, TurnRecord
from dojo.errors import InputError
from dojo.rewards.outcome import CaseOutcome
from dojo.tasks.model import Task

STALE_PARTIAL_S = 600.0  # a shard is written in seconds: a partial file this old is a killed writer's
SCHEMA = pa.schema(
    [
        pa.field("run_id", pa.string(), nullable=False),
        pa.field("episode_id", pa.string(), nullable=False),
        pa.field("group_id", pa.string(), nullable=False),
        pa.field("task_id", pa.string(), nullable=False),
        pa.field("sample_index", pa.int32(), nullable=False),
        pa.field("attempt", pa.int32(), nullable=False),
        pa.field("status", pa.string(), nullable=False),
        pa.field("reward", pa.float64()),
        pa.field("verdict", pa.string()),
        pa.field("passed", pa.int32()),
        pa.field("total", pa.int32()),
        pa.field("components", pa.string()),  # JSON object name -> value
        pa.field("flags", pa.list_(pa.string())),
        pa.field("cases", pa.string()),  # JSON list: per-test outcomes (index, passed, detail); null before it existed
        pa.field("num_turns", pa.int32(), nullable=False),
        pa.field("tool_calls", pa.int32()),  # tool calls over the episode (null in shards written before it)
        pa.field("prompt", pa.string(), nullable=False),  # JSON list of the task's chat messages
        pa.field("messages", pa.string(), nullable=False),  # JSON list: the whole conversation
        pa.field("final", pa.string()),  # the text that was graded
        pa.field("token_ids", pa.list_(pa.list_(pa.int64()))),  # per turn; null inner list when unknown
        pa.field("logprobs", pa.list_(pa.list_(pa.float32()))),  # per turn; null inner list when unknown
        pa.field("prompt_token_ids", pa.list_(pa.list_(pa.int64()))),  # per turn: the ids it was conditioned on
        pa.field("turns", pa.string(), nullable=False),  # JSON list of turn records (tool calls, results, timings)
        pa.field("turn_rewards", pa.list_(pa.float64())),  # per turn: the process reward's total (null: none)
        pa.field("prompt_tokens", pa.int64(), nullable=False),
        pa.field("completion_tokens", pa.int64(), nullable=False),
        pa.field("wall_seconds", pa.float64(), nullable=False),
        pa.field("policy_seconds", pa.float64(), nullable=False),
        pa.field("tool_seconds", pa.float64(), nullable=False),
        pa.field("grade_seconds", pa.float64(), nullable=False),
        pa.field("started_at", pa.timestamp("ms", tz="UTC"), nullable=False),
        pa.field("task_source", pa.string()),
        pa.field("difficulty", pa.float64()),
        pa.field("error", pa.string()),
    ]
)


MAX_CASES = 200  # per-test outcomes kept per episode (the viewer shows them), each detail cut at:
MAX_CASE_DETAIL = 300

BUCKET_PROTOCOLS = frozenset({"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss"})


def _protocols(fs: Any) -> set[str]:
    return set(fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,))


def is_local(fs: Any) -> bool:
    return "file" in _protocols(fs)


def open_url(url: str, storage_options: dict[str, Any] | None = None, *, create: bool = True) -> tuple[Any, str]:
    """The filesystem and path of ``url`` (a directory made unless ``create`` is False); on an object
    store, a clear error when its bucket is missing. S3-compatible servers (MinIO, Ceph, ...): set
    ``AWS_ENDPOINT_URL``."""
    if not url:
        raise InputError("the store needs a directory or fsspec URL (e.g. runs/r1 or s3://bucket/r1)")
    try:
        fs, root = fsspec.core.url_to_fs(url, **(storage_options or {}))
    except (ImportError, ValueError) as e:
        raise InputError(f"cannot open {url!r}: {e}") from e
    if not _protocols(fs) & BUCKET_PROTOCOLS:
        if fs.isfile(root):
            raise InputError(f"{url} is a file: a store is a directory (or an object store's URL)")
        if create:
            fs.makedirs(root, exist_ok=True)  # a directory: local disk, memory, ...
    else:
        bucket = root.split("/", 1)[0]
        try:
            found = fs.exists(bucket)
        except Exception as e:  # credentials, endpoint, network: say which URL failed and why
            raise InputError(f"cannot reach the bucket of {url!r}: {type(e).__name__}: {e}") from e
        if not found:
            raise InputError(
                f"the bucket {bucket!r} of {url!r} does not exist (or these credentials cannot see it): create it "
                "first (e.g. 'aws s3 mb s3://BUCKET'), or fix the URL; for an S3-compatible server set AWS_ENDPOINT_URL"
            )
    return fs, root


def episode_row(ep: Episode, task: Task, run_id: str) -> dict[str, Any]:
    """One episode as a row of ``SCHEMA``."""
    r = ep.reward
    prompt = ep.messages[: next((i for i, m in enumerate(ep.messages) if m["role"] == "assistant"), len(ep.messages))]
    return {
        "run_id": run_id,
        "episode_id": ep.episode_id,
        "group_id": ep.group_id,
        "task_id": ep.task_id,
        "sample_index": ep.sample_index,
        "attempt": ep.attempt,
        "status": ep.status,
        "reward": r.value if r else None,
        "verdict": r.verdict if r else None,
        "passed": r.passed if r else None,
        "total": r.total if r else None,
        "components": json.dumps(r.components) if r else None,
        "flags": list(r.flags) if r else None,
        "cases": json.dumps([_case_json(c) for c in r.cases[:MAX_CASES]]) if r else None,
        "num_turns": len(ep.turns),
        "tool_calls": sum(len(t.tool_results) for t in ep.turns),
        "prompt": json.dumps(prompt),
        "messages": json.dumps(ep.messages),
        "final": ep.final,
        "token_ids": [t.completion.token_ids for t in ep.turns],
        "logprobs": [t.completion.logprobs for t in ep.turns],
        "prompt_token_ids": [t.completion.prompt_token_ids for t in ep.turns],
        "turns": json.dumps([_turn_json(t, ep, i) for i, t in enumerate(ep.turns)]),
        "turn_rewards": [parts["total"] for parts in ep.turn_rewards] if ep.turn_rewards is not None else None,
        "prompt_tokens": ep.prompt_tokens,
        "completion_tokens": ep.completion_tokens,
        "wall_seconds": ep.wall_seconds,
        "policy_seconds": ep.policy_seconds,
        "tool_seconds": ep.tool_seconds,
        "grade_seconds": ep.grade_seconds,
        "started_at": int(ep.started_at * 1000),
        "task_source": task.metadata.source,
        "difficulty": task.metadata.difficulty,
        "error": ep.error,
    }


def _case_json(case: CaseOutcome) -> dict[str, Any]:
    return {"index": case.index, "passed": case.passed, "detail": case.detail[:MAX_CASE_DETAIL]}


def _turn_json(turn: TurnRecord, ep: Episode, index: int) -> dict[str, Any]:
    """A turn for the ``turns`` column (its prompt's ids, long, have a column of their own), with its
    process reward's parts (``reward``) when the episode has them."""
    record = turn.model_dump(mode="json")
    record["completion"].pop("prompt_token_ids", None)
    if ep.turn_rewards is not None and index < len(ep.turn_rewards):
        record["reward"] = ep.turn_rewards[index]
    return record


class TrajectoryStore:
    """Parquet shards of finished groups under one fsspec URL (a local directory by default)."""

    def __init__(
        self, url: str, *, run_id: str | None = None, storage_options: dict[str, Any] | None = None,
        read_only: bool = False,
    ) -> None:  # fmt: skip
        """``read_only``: a reader's (the dashboard, ``dojo judge sample``): it writes and removes
        nothing, so a live run's shard in the writing is never touched."""
        self.url = url
        self.fs, self.root = open_url(url, storage_options, create=not read_only)
        self.run_id = run_id or uuid.uuid4().hex[:12]
        self.read_only = read_only
        self._local = is_local(self.fs)
        if self._local and not read_only:
            self._clean_tmp()

    def _path(self, name: str) -> str:
        return f"{self.root.rstrip('/')}/{name}"

    def _clean_tmp(self) -> None:
        """Remove what a killed writer left half-written: ``_tmp-*`` files older than
        ``STALE_PARTIAL_S``. A younger one may be another writer's shard in the writing (the
        dashboard had removed them all as it opened a run, and a live ``dojo train`` lost its shard)."""
        now = time.time()
        for path in self.fs.ls(self.root, detail=False):
            if os.path.basename(path).startswith("_tmp-"):
                with contextlib.suppress(FileNotFoundError):  # (its writer renamed it meanwhile)
                    if now - os.path.getmtime(path) > STALE_PARTIAL_S:
                        self.fs.rm(path)

    def shards(self) -> list[str]:
        """The committed shard paths, oldest first."""
        self.fs.invalidate_cache(self.root)  # another writer (or a resumed run) may have committed since
        try:
            names = self.fs.ls(self.root, detail=False)
        except FileNotFoundError:
            return []
        return sorted(p for p in names if os.path.basename(p).startswith("shard-") and p.endswith(".parquet"))

    def write(self, rows: Iterable[dict[str, Any]]) -> str | None:
        """Commit rows (whole groups) as one new shard; returns its path (None when there are no rows)."""
        if self.read_only:
            raise InputError(f"the store {self.url} was opened read_only: open it without read_only to write")
        rows = list(rows)
        if not rows:
            return None
        table = pa.Table.from_pylist(rows, schema=SCHEMA)
        name = f"shard-{time.time_ns():020d}-{uuid.uuid4().hex[:8]}.parquet"
        final = self._path(name)
        if self._local:
            tmp = self._path(f"_tmp-{name}.partial")
            with self.fs.open(tmp, "wb") as f:
                pq.write_table(table, f)
                f.flush()
                if hasattr(f, "fileno"):
                    os.fsync(f.fileno())
            self.fs.mv(tmp, final)
        else:
            with self.fs.open(final, "wb") as f:
                pq.write_table(table, f)
        return final

    def write_groups(self, groups: Iterable[tuple[Task, list[Episode]]]) -> str | None:
        """Commit whole groups of episodes as one shard."""
        return self.write(episode_row(ep, task, self.run_id) for task, eps in groups for ep in eps)

    def read_shard(self, path: str, columns: list[str] | None = None) -> pa.Table:
        with self.fs.open(path, "rb") as f:
            return pq.read_table(pa.BufferReader(f.read()), columns=columns)

    def read_episode(self, path: str, episode_id: str, leave_out: Iterable[str] = ()) -> pa.Table:
        """The rows of ``episode_id`` in the shard at ``path``, without the ``leave_out`` columns,
        which are never read (an episode's view read its whole shard, token ids and log-probabilities
        of every episode included: 261 MiB of memory for one view of a 33 MiB shard)."""
        with self.fs.open(path, "rb") as f:
            shard = pq.ParquetFile(f)
            skip = set(leave_out)
            table = shard.read(columns=[c for c in shard.schema_arrow.names if c not in skip])
        return table.filter(pc.equal(table.column("episode_id"), episode_id))

    def remove_shard(self, path: str) -> None:
        if self.read_only:
            raise InputError(f"the store {self.url} was opened read_only: open it without read_only to remove shards")
        self.fs.rm(path)

    def read(self, columns: list[str] | None = None) -> pa.Table:
        """Every committed row, as one Arrow table."""
        tables = [self.read_shard(path, columns) for path in self.shards()]
        if not tables:
            return SCHEMA.empty_table() if columns is None else SCHEMA.empty_table().select(columns)
        return pa.concat_tables(tables, promote_options="default")  # (shards from before turn_rewards: nulls)

    def completed_groups(self) -> set[str]:
        """Group ids already committed: a resumed run skips them."""
        return set(self.read(["group_id"]).column("group_id").to_pylist())

    def rows(self) -> Iterator[dict[str, Any]]:
        yield from self.read().to_pylist()
