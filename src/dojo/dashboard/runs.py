"""A run as the dashboard sees it: its trajectory store read incrementally, and its training metrics.

A run is a directory that ``dojo train`` writes (``metrics.csv``, ``eval-steps.csv`` and the store
under ``trajectories/``) or any trajectory store URL (``dojo rollout --out``: a directory of
Parquet shards, ``s3://...``). Shards are immutable once they are visible (``TrajectoryStore``), so
``RunView.refresh`` reads only the shards it has not seen, and only the small columns: never the
messages, turns or token ids, which the trajectory viewer reads for one episode at a time
(``episode``). Every curve is computed from these columns in memory (NumPy): a first load of a run
of 100,000 episodes reads ~15 columns once (``bench/dashboard.py`` measures it).
"""

from __future__ import annotations

import csv
import json
import math
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dojo.agent.episode import SCORED_STATUSES as EPISODE_SCORED_STATUSES
from dojo.errors import InputError
from dojo.rollout.store import TrajectoryStore

# The columns a curve needs; ``tool_calls`` is null in shards written before it existed.
HEAVY_COLUMNS = ("token_ids", "logprobs", "prompt_token_ids")  # an episode's view never shows them
SMALL_COLUMNS = [
    "episode_id", "group_id", "task_id", "status", "reward", "verdict", "flags", "num_turns", "tool_calls",
    "completion_tokens", "wall_seconds", "policy_seconds", "tool_seconds", "grade_seconds", "started_at",
    "difficulty",
]  # fmt: skip
INFRA_STATUSES = ("infra_error", "policy_error")  # failures of the machinery, never the model's
SCORED_STATUSES = sorted(EPISODE_SCORED_STATUSES)  # (a copy of its own had drifted)
MAX_POINTS = 400  # points a curve has at most: episodes are pooled into windows of equal size,
MIN_WINDOW = 16  # of at least this many episodes once a run has 20 such windows (a rate of 1 is noise)
TRAIN_COLUMNS = (
    "reward", "pass_rate", "curriculum_level", "completion_length", "turns", "step_time", "entropy", "loss",
    "judge/agreement",
)  # fmt: skip


def _is_store_dir(path: Path) -> bool:
    return path.is_dir() and any(p.name.startswith("shard-") for p in path.iterdir())


@dataclass
class RunLocation:
    """Where a run's data lies: its store URL and, for a ``dojo train`` directory, the directory."""

    name: str
    store_url: str
    train_dir: Path | None = None

    @classmethod
    def parse(cls, spec: str) -> RunLocation:
        """A run directory or store URL from the command line; ``NAME=SPEC`` names it. A local path
        that does not exist yet is taken as a run directory that a run is about to write (the page
        waits for it); anything else that is neither a ``dojo train`` directory nor a store is an
        InputError that says what was expected."""
        name, sep, target = spec.partition("=")
        if not sep or "://" in name:
            name, target = "", spec
        if not target:
            raise InputError(f"{spec!r} names no run: give a run directory or a store URL (NAME=PATH to name it)")
        if "://" in target and not target.startswith("file://"):
            return cls(name or target.rstrip("/").rsplit("/", 1)[-1], target)
        path = Path(target.removeprefix("file://")).expanduser()
        label = name or path.name or str(path)
        if not path.exists() or (path / "metrics.csv").exists() or (path / "trajectories").exists():
            return cls(label, str(path / "trajectories"), path)
        if not path.is_dir():
            raise InputError(f"{target} is a file: give a run directory (dojo train --out) or a trajectory store")
        if _is_store_dir(path) or not any(path.iterdir()):
            return cls(label, str(path))
        raise InputError(
            f"{target} is neither a run directory (dojo train --out: metrics.csv, trajectories/) nor a trajectory "
            "store (shard-*.parquet): give one of those"
        )


@dataclass
class Episodes:
    """The small columns of every episode read so far, one NumPy array each, in the order the
    episodes were committed (shard by shard; within a shard, by start time)."""

    episode_id: np.ndarray = field(default_factory=lambda: np.array([], dtype=object))
    group_id: np.ndarray = field(default_factory=lambda: np.array([], dtype=object))
    task_id: np.ndarray = field(default_factory=lambda: np.array([], dtype=object))
    status: np.ndarray = field(default_factory=lambda: np.array([], dtype=object))
    verdict: np.ndarray = field(default_factory=lambda: np.array([], dtype=object))
    flags: np.ndarray = field(default_factory=lambda: np.array([], dtype=object))  # comma-joined
    reward: np.ndarray = field(default_factory=lambda: np.array([], dtype=float))  # NaN: not scored
    num_turns: np.ndarray = field(default_factory=lambda: np.array([], dtype=float))
    tool_calls: np.ndarray = field(default_factory=lambda: np.array([], dtype=float))  # NaN: not recorded
    completion_tokens: np.ndarray = field(default_factory=lambda: np.array([], dtype=float))
    wall: np.ndarray = field(default_factory=lambda: np.array([], dtype=float))
    policy: np.ndarray = field(default_factory=lambda: np.array([], dtype=float))
    tools: np.ndarray = field(default_factory=lambda: np.array([], dtype=float))
    grading: np.ndarray = field(default_factory=lambda: np.array([], dtype=float))
    finished: np.ndarray = field(default_factory=lambda: np.array([], dtype=float))  # epoch seconds
    difficulty: np.ndarray = field(default_factory=lambda: np.array([], dtype=float))  # NaN: none
    shard: np.ndarray = field(default_factory=lambda: np.array([], dtype=np.int32))  # index into shards

    def __len__(self) -> int:
        return len(self.episode_id)

    @property
    def scored(self) -> np.ndarray:
        return np.asarray(np.isin(self.status, SCORED_STATUSES) & ~np.isnan(self.reward), dtype=bool)

    @property
    def passed(self) -> np.ndarray:
        return np.asarray(self.scored & (self.verdict == "pass"), dtype=bool)

    @property
    def hacked(self) -> np.ndarray:
        """A hack verdict, or a ``hack:`` flag (the reward zeroed it or not)."""
        flagged = np.array(["hack:" in f for f in self.flags], dtype=bool) if len(self) else np.zeros(0, bool)
        return np.asarray((self.verdict == "hack") | flagged, dtype=bool)

    @property
    def infra_failed(self) -> np.ndarray:
        return np.asarray(np.isin(self.status, INFRA_STATUSES), dtype=bool)

    def extend(self, tables: list[tuple[pa.Table, int]]) -> None:
        """Append shards' rows (each with its index in the run's shard list), concatenating each
        column once for them all: appending shard by shard copied a 100,000-episode run ~200 times."""
        parts: dict[str, list[np.ndarray]] = {}
        for table, shard_index in tables:
            for key, column in self._columns(table, shard_index).items():
                parts.setdefault(key, []).append(column)
        for key, columns in parts.items():
            setattr(self, key, np.concatenate([getattr(self, key), *columns]))

    @staticmethod
    def _columns(table: pa.Table, shard_index: int) -> dict[str, np.ndarray]:
        n = table.num_rows
        order = np.argsort(_floats(table, "started_at", scale=1e-3), kind="stable")

        def col(name: str) -> pa.ChunkedArray:
            return table.column(name) if name in table.column_names else pa.chunked_array([pa.nulls(n)])

        flags = col("flags")
        if flags.type == pa.null():
            joined: Any = pa.array([""] * n)
        else:
            joined = pc.binary_join(pc.fill_null(flags, pa.scalar([], pa.list_(pa.string()))), ",")
        new = {
            "episode_id": _strings(col("episode_id")), "group_id": _strings(col("group_id")),
            "task_id": _strings(col("task_id")), "status": _strings(col("status")),
            "verdict": _strings(col("verdict")), "flags": _strings(joined),
            "reward": _floats(table, "reward"), "num_turns": _floats(table, "num_turns"),
            "tool_calls": _floats(table, "tool_calls"), "completion_tokens": _floats(table, "completion_tokens"),
            "wall": _floats(table, "wall_seconds"), "policy": _floats(table, "policy_seconds"),
            "tools": _floats(table, "tool_seconds"), "grading": _floats(table, "grade_seconds"),
            "difficulty": _floats(table, "difficulty"),
        }  # fmt: skip
        new["finished"] = _floats(table, "started_at", scale=1e-3) + np.nan_to_num(new["wall"])
        new["shard"] = np.full(n, shard_index, dtype=np.int32)
        return {key: values[order] for key, values in new.items()}


def _strings(array: pa.ChunkedArray | pa.Array) -> np.ndarray:
    values = array.to_pylist()
    return np.array([v if v is not None else "" for v in values], dtype=object)


def _floats(table: pa.Table, name: str, scale: float = 1.0) -> np.ndarray:
    if name not in table.column_names:
        return np.full(table.num_rows, np.nan)
    column = table.column(name)
    if pa.types.is_timestamp(column.type):
        column = pc.cast(column, pa.int64())
    values = pc.cast(column, pa.float64()).to_numpy(zero_copy_only=False)
    return np.asarray(values, dtype=float) * scale


def _mean(values: np.ndarray) -> float | None:
    finite = values[~np.isnan(values)]
    return float(finite.mean()) if len(finite) else None


def _share(mask: np.ndarray, of: np.ndarray) -> float | None:
    total = int(of.sum())
    return float((mask & of).sum()) / total if total else None


class RunView:
    """One run, kept up to date: ``refresh()`` reads the shards written since the last call (and
    the training metrics); the other methods answer from memory. Thread-safe: the server refreshes
    in a worker thread while requests read."""

    def __init__(self, location: RunLocation) -> None:
        self.location = location
        self.name = location.name
        self.episodes = Episodes()
        self.shards: list[str] = []
        self.train_rows: list[dict[str, float | None]] = []
        self.eval_rows: list[dict[str, float | None]] = []
        self.refreshed_at = 0.0
        self.error: str | None = None  # why the last refresh could not read the run
        self.waiting: str | None = None  # a run directory that does not exist yet (a typo says so too)
        self._store: TrajectoryStore | None = None
        self._unreadable: set[str] = set()  # shards that could not be read when last tried
        self._lock = threading.Lock()

    # -- reading -----------------------------------------------------------------------------------
    def refresh(self) -> int:
        """Read what the run has written since the last refresh; how many new episodes. A shard
        that cannot be read is left out and named in ``error`` (and tried again next time); the
        others are read. Shards a resumed run removed (``drop_newer_shards``) leave the view too."""
        with self._lock:
            added, problems = 0, []
            try:
                if self._store is None:
                    waited = self.location.train_dir
                    if waited is not None and not (waited / "trajectories").exists() and _is_store_dir(waited):
                        # the directory waited for is a store, a `dojo rollout --out`, not a train run's: its
                        # episodes had never been shown (the page looked for its trajectories/ alone)
                        self.location = RunLocation(self.location.name, str(waited))
                    fs, root = fsspec.core.url_to_fs(self.location.store_url)
                    if not fs.exists(root):  # not written yet; and never made here (dojo train --out
                        raise FileNotFoundError(root)  # refuses a directory that is not empty)
                    self._store = TrajectoryStore(self.location.store_url, read_only=True)
                    self.waiting = None
                listed = self._store.shards()
                last = self.shards[-1] if self.shards else ""
                known = set(self.shards)
                fresh = [p for p in listed if p not in known]
                # read the run again from its start where shards were removed (a resumed run), or where
                # one that could not be read before now belongs among those shown (the episodes stay
                # in the run's order: the alert windows take the last groups as the latest)
                if not known <= set(listed) or any(p < last and p not in self._unreadable for p in fresh):
                    self.episodes, self.shards = Episodes(), []
                    last, fresh = "", listed
                for path in fresh:
                    try:
                        table = self._read_small(path)
                    except (OSError, pa.ArrowException, ValueError) as e:
                        problems.append(f"cannot read shard {path}: {e}")
                        self._unreadable.add(path)
                        continue
                    if path in self._unreadable:
                        self._unreadable.discard(path)
                        if path < last:
                            continue  # (its place is among those shown: the next refresh reads the run again)
                    self.episodes.extend([(table, len(self.shards))])
                    self.shards.append(path)
                    added += table.num_rows
            except FileNotFoundError:
                self._store = None  # not written yet (a run about to start): try again next time
                waited = self.location.train_dir
                self.waiting = f"waiting for {waited}: nothing there yet" if waited and not waited.exists() else None
            except (OSError, pa.ArrowException, InputError) as e:
                self._store = None
                problems.append(f"cannot read {self.location.store_url}: {e}")
            if self.location.train_dir is not None:
                for name in ("metrics.csv", "eval-steps.csv"):
                    try:
                        rows = _read_csv(self.location.train_dir / name)
                    except (OSError, UnicodeDecodeError, csv.Error) as e:
                        problems.append(f"cannot read {self.location.train_dir / name}: {e}")
                        continue
                    if name == "metrics.csv":
                        self.train_rows = rows
                    else:
                        self.eval_rows = rows
            self.error = "; ".join(problems) or None
            self.refreshed_at = time.time()
            return added

    def _read_small(self, path: str) -> pa.Table:
        """The shard's small columns only: Parquet keeps each column apart, so the conversations
        (most of a shard's bytes) are never read."""
        assert self._store is not None
        with self._store.fs.open(path, "rb") as f:
            shard = pq.ParquetFile(f)
            available = set(shard.schema_arrow.names)
            return shard.read(columns=[c for c in SMALL_COLUMNS if c in available])

    # -- answers -----------------------------------------------------------------------------------
    def summary(self) -> dict[str, Any]:
        eps = self.episodes
        groups = len(set(eps.group_id.tolist())) if len(eps) else 0
        return {
            "name": self.name,
            "store": self.location.store_url,
            "episodes": len(eps),
            "groups": groups,
            "mean_reward": _mean(np.where(eps.scored, eps.reward, np.nan)) if len(eps) else None,
            "pass_rate": _share(eps.passed, eps.scored) if len(eps) else None,
            "hack_rate": _share(eps.hacked, eps.scored | eps.hacked) if len(eps) else None,
            "infra_failure_rate": float(eps.infra_failed.mean()) if len(eps) else None,
            "training_steps": len(self.train_rows),
            "error": self.error,
            "waiting": self.waiting,
            "refreshed_at": self.refreshed_at,
        }

    def curves(self) -> dict[str, Any]:
        """Every curve of the run: by episode (windows of equal size, at most ``MAX_POINTS`` points),
        by time (throughput), and by training step (``metrics.csv``, ``eval-steps.csv``)."""
        with self._lock:
            eps = self.episodes
            out: dict[str, Any] = {"by_episode": _episode_curves(eps), "by_time": _time_curves(eps)}
            out["by_step"] = _step_curves(self.train_rows, TRAIN_COLUMNS)
            out["eval"] = _step_curves(self.eval_rows, ("mean_reward", "pass_rate", "greedy_pass"))
            return out

    def window(self, last_groups: int) -> dict[str, float | None]:
        """Rates over the run's last ``last_groups`` groups (what alert rules look at)."""
        with self._lock:
            eps = self.episodes
            if not len(eps):
                return {"groups": 0.0}
            seen: dict[str, None] = {}
            for g in reversed(eps.group_id.tolist()):
                seen.setdefault(g, None)
                if len(seen) >= last_groups:
                    break
            mask = np.isin(eps.group_id, list(seen))
            scored, hacked = eps.scored & mask, eps.hacked & mask
            return {
                "groups": float(len(seen)),
                "hack_rate": _share(hacked, scored | hacked),
                "infra_failure_rate": float(eps.infra_failed[mask].mean()),
                "pass_rate": _share(eps.passed & mask, scored),
                "reward": _mean(np.where(scored, eps.reward, np.nan)),
                "throughput": _throughput(eps.finished[mask]),
                "throughput_overall": _throughput(eps.finished),
            }

    def slowest(self, n: int = 20) -> dict[str, list[dict[str, Any]]]:
        """The ``n`` slowest episodes, and groups (a group takes as long as its slowest episode)."""
        with self._lock:
            eps = self.episodes
            wall = np.nan_to_num(eps.wall)
            top = np.argsort(-wall, kind="stable")[:n]
            episodes = [self._brief(int(i)) for i in top]
            by_group: dict[str, list[int]] = {}
            for i, g in enumerate(eps.group_id.tolist()):
                by_group.setdefault(g, []).append(i)
            ranked = sorted(by_group.items(), key=lambda kv: -max(wall[j] for j in kv[1]))[:n]
            groups = [
                {
                    "group_id": g,
                    "task_id": str(eps.task_id[members[0]]),
                    "episodes": len(members),
                    "wall_seconds": float(max(wall[j] for j in members)),
                    "slowest_episode": str(eps.episode_id[max(members, key=lambda j: wall[j])]),
                    "passed": int(sum(bool(eps.passed[j]) for j in members)),
                }
                for g, members in ranked
            ]
            return {"episodes": episodes, "groups": groups}

    def search(
        self, task: str = "", verdict: str = "", flag: str = "", status: str = "", limit: int = 100
    ) -> list[dict[str, Any]]:
        """Episodes whose task id contains ``task``, whose verdict (or status) is ``verdict``
        (``status``), and with a flag containing ``flag``; the latest first."""
        with self._lock:
            eps = self.episodes
            mask = np.ones(len(eps), dtype=bool)
            if task:
                mask &= np.array([task in t for t in eps.task_id], dtype=bool)
            if verdict:
                mask &= eps.verdict == verdict
            if status:
                mask &= eps.status == status
            if flag:
                mask &= np.array([flag in f for f in eps.flags], dtype=bool)
            found = np.nonzero(mask)[0][::-1][:limit]
            return [self._brief(int(i)) for i in found]

    def _brief(self, i: int) -> dict[str, Any]:
        eps = self.episodes
        reward = eps.reward[i]
        return {
            "episode_id": str(eps.episode_id[i]),
            "group_id": str(eps.group_id[i]),
            "task_id": str(eps.task_id[i]),
            "status": str(eps.status[i]),
            "verdict": str(eps.verdict[i]) or None,
            "reward": None if math.isnan(reward) else float(reward),
            "flags": [f for f in str(eps.flags[i]).split(",") if f],
            "turns": None if math.isnan(eps.num_turns[i]) else int(eps.num_turns[i]),
            "tool_calls": None if math.isnan(eps.tool_calls[i]) else int(eps.tool_calls[i]),
            "wall_seconds": float(eps.wall[i]),
        }

    def episode(self, episode_id: str) -> dict[str, Any] | None:
        """One episode in full (its messages, turns with tool calls and observations, per-turn
        rewards, the graded answer and its reward's parts), read from its shard; None if unknown."""
        with self._lock:
            hits = np.nonzero(self.episodes.episode_id == episode_id)[0]
            if not len(hits) or self._store is None:
                return None
            path = self.shards[int(self.episodes.shard[hits[0]])]
            store = self._store
        try:
            table = store.read_episode(path, episode_id, leave_out=HEAVY_COLUMNS)
        except FileNotFoundError:  # (removed by a resumed run since the last refresh)
            return None
        if table.num_rows == 0:
            return None
        row: dict[str, Any] = table.slice(0, 1).to_pylist()[0]
        for key in ("messages", "prompt", "turns", "components"):
            if isinstance(row.get(key), str):
                row[key] = json.loads(row[key])
        row["started_at"] = row["started_at"].isoformat() if row.get("started_at") is not None else None
        return row


def _read_csv(path: Path) -> list[dict[str, float | None]]:
    if not path.is_file():
        return []
    rows: list[dict[str, float | None]] = []
    with path.open(newline="") as f:
        for raw in csv.DictReader(f):
            row: dict[str, float | None] = {}
            for key, value in raw.items():
                try:
                    row[key] = float(value) if value not in (None, "") else None
                except ValueError:
                    row[key] = None
            rows.append(row)
    return rows


def _windows(n: int) -> list[tuple[int, int]]:
    size = max(1, math.ceil(n / MAX_POINTS), min(MIN_WINDOW, n // 20))
    return [(start, min(n, start + size)) for start in range(0, n, size)]


def _episode_curves(eps: Episodes) -> dict[str, Any]:
    n = len(eps)
    if not n:
        return {"x": []}
    scored, passed, hacked, infra = eps.scored, eps.passed, eps.hacked, eps.infra_failed
    rounded = np.round(eps.difficulty, 3)
    levels = [float(v) for v in np.unique(rounded[~np.isnan(rounded)])]
    if len(levels) > 8:  # pooled into 5 bands of equal width
        lo, hi = levels[0], levels[-1]
        bands = np.minimum(4, ((eps.difficulty - lo) / max(hi - lo, 1e-9) * 5).astype(int, copy=False))
        names = [f"{lo + (hi - lo) * b / 5:.2g}-{lo + (hi - lo) * (b + 1) / 5:.2g}" for b in range(5)]
        level_of = np.where(np.isnan(eps.difficulty), -1, bands)
    else:
        names = [f"{v:g}" for v in levels]
        level_of = np.full(n, -1)
        for index, value in enumerate(levels):
            level_of[rounded == value] = index
    out: dict[str, list[float | None]] = {k: [] for k in (
        "x", "reward", "pass_rate", "hack_rate", "infra_failure_rate", "completion_tokens", "turns", "tool_calls",
        "policy_share", "tool_share", "grading_share", "difficulty",
    )}  # fmt: skip
    by_level: dict[str, list[float | None]] = {name: [] for name in names}
    for start, end in _windows(n):
        s = slice(start, end)
        out["x"].append(float(end))
        out["reward"].append(_mean(np.where(scored[s], eps.reward[s], np.nan)))
        out["pass_rate"].append(_share(passed[s], scored[s]))
        out["hack_rate"].append(_share(hacked[s], scored[s] | hacked[s]))
        out["infra_failure_rate"].append(float(infra[s].mean()))
        out["completion_tokens"].append(_mean(eps.completion_tokens[s]))
        out["turns"].append(_mean(eps.num_turns[s]))
        out["tool_calls"].append(_mean(eps.tool_calls[s]))
        wall = float(np.nansum(eps.wall[s]))
        for key, part in (("policy_share", eps.policy), ("tool_share", eps.tools), ("grading_share", eps.grading)):
            out[key].append(float(np.nansum(part[s])) / wall if wall > 0 else None)
        out["difficulty"].append(_mean(eps.difficulty[s]))
        for index, name in enumerate(names):
            at = level_of[s] == index
            by_level[name].append(_share(passed[s] & at, scored[s] & at))
    return {**out, "pass_rate_by_level": by_level}


def _time_curves(eps: Episodes) -> dict[str, list[float]]:
    """In at most ``MAX_POINTS`` buckets of equal length: episodes finished per second, and the idle
    share, the part of each bucket when no episode was in flight (neither the policy nor a sandbox had
    work: a training step, a stall). The store has no per-turn times, so the policy's own idle time
    within an episode (waiting on tools or grading) is in the time split instead."""
    known = ~np.isnan(eps.finished)
    finished = eps.finished[known]
    if len(finished) < 2 or finished.max() <= finished.min():
        return {"t": [], "episodes_per_second": [], "idle_share": []}
    started = finished - np.nan_to_num(eps.wall[known])
    lo, hi = float(started.min()), float(finished.max())
    buckets = int(min(MAX_POINTS, max(1, len(finished) // 5)))
    counts, edges = np.histogram(finished, bins=buckets, range=(lo, hi))
    width = (hi - lo) / buckets
    return {
        "t": [float(e) for e in edges[1:]],
        "episodes_per_second": [float(c) / width for c in counts],
        "idle_share": _idle_shares(started, finished, edges),
    }


def _idle_shares(started: np.ndarray, finished: np.ndarray, edges: np.ndarray) -> list[float]:
    """For each bucket between consecutive ``edges``: the share of it that no episode's
    [started, finished] interval covers (the intervals merged first)."""
    order = np.argsort(started, kind="stable")
    busy: list[tuple[float, float]] = []
    for a, b in zip(started[order].tolist(), finished[order].tolist(), strict=True):
        if busy and a <= busy[-1][1]:
            busy[-1] = (busy[-1][0], max(busy[-1][1], b))
        else:
            busy.append((a, b))
    covered = np.zeros(len(edges) - 1)
    for a, b in busy:
        first = max(0, int(np.searchsorted(edges, a, side="right")) - 1)
        last = min(len(covered) - 1, int(np.searchsorted(edges, b, side="left")) - 1)
        for i in range(first, last + 1):
            covered[i] += max(0.0, min(b, edges[i + 1]) - max(a, edges[i]))
    widths = np.diff(edges)
    return [float(max(0.0, 1.0 - c / w)) if w > 0 else 0.0 for c, w in zip(covered, widths, strict=True)]


def _throughput(finished: np.ndarray) -> float | None:
    finished = finished[~np.isnan(finished)]
    if len(finished) < 2 or finished.max() <= finished.min():
        return None
    return float(len(finished) - 1) / float(finished.max() - finished.min())


def _step_curves(rows: list[dict[str, float | None]], columns: tuple[str, ...]) -> dict[str, list[float | None]]:
    if not rows:
        return {"step": []}
    out: dict[str, list[float | None]] = {"step": [r.get("step") for r in rows]}
    for column in columns:
        if any(r.get(column) is not None for r in rows):
            out[column] = [r.get(column) for r in rows]
    return out
