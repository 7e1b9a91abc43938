"""Tasks to and from JSONL and Parquet, on any fsspec path (local by default, ``s3://`` and co.)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import ValidationError

from dojo.errors import InputError, field_problems
from dojo.tasks.model import Task

# Every field of ``Task`` is a column: the plain ones as themselves, the nested ones as JSON text, so
# one flat schema fits every form. (A fixed list of columns had dropped workspace, document, tools,
# api, environment and partial_credit: a document, shell, repo or tools task exported as Parquet did
# not load back, and a data-analysis one lost its environment; found 2026-12-06.) ``source`` and
# ``difficulty`` repeat the metadata's, for readers that filter on them.
PLAIN_COLUMNS = {
    "id": pa.string(), "domain": pa.string(), "form": pa.string(), "language": pa.string(),
    "entry_point": pa.string(), "reference": pa.string(), "float_tolerance": pa.float64(),
    "answer_match": pa.string(), "checker": pa.string(), "environment": pa.string(), "partial_credit": pa.bool_(),
}  # fmt: skip
JSON_COLUMNS = tuple(name for name in Task.model_fields if name not in PLAIN_COLUMNS)
PARQUET_SCHEMA = pa.schema(
    [(name, PLAIN_COLUMNS.get(name, pa.string())) for name in Task.model_fields]
    + [("source", pa.string()), ("difficulty", pa.float64())]
)


class TaskFileError(InputError):
    """A task file could not be read; the message names the file, the row and what was wrong."""


def _format_of(path: str) -> str:
    lower = path.lower()
    if lower.endswith((".jsonl", ".jsonl.gz", ".ndjson")):
        return "jsonl"
    if lower.endswith((".parquet", ".pq")):
        return "parquet"
    raise TaskFileError(f"{path}: unknown task file type; use a .jsonl or .parquet file")


def save_tasks(tasks: Iterable[Task], path: str) -> int:
    """Write tasks to ``path`` (.jsonl or .parquet); returns how many were written."""
    tasks = list(tasks)
    fmt = _format_of(path)
    if fmt == "jsonl":
        with fsspec.open(path, "wt", compression="infer", encoding="utf-8") as f:
            for t in tasks:
                f.write(t.model_dump_json(exclude_none=True) + "\n")
        return len(tasks)
    rows: list[dict[str, Any]] = []
    for t in tasks:
        data = t.model_dump(mode="json")
        row = {k: data.get(k) for k in PARQUET_SCHEMA.names if k not in JSON_COLUMNS}
        for k in JSON_COLUMNS:
            row[k] = None if data.get(k) is None else json.dumps(data[k])
        row["source"] = t.metadata.source
        row["difficulty"] = t.metadata.difficulty
        rows.append(row)
    table = pa.Table.from_pylist(rows, schema=PARQUET_SCHEMA)
    with fsspec.open(path, "wb") as f:
        pq.write_table(table, f)
    return len(tasks)


def _validate(row: dict[str, Any], where: str) -> Task:
    try:
        return Task.model_validate(row)
    except ValidationError as e:
        problems = field_problems(e, "task")
        shown = "; ".join(problems[:5]) + (f"; and {len(problems) - 5} more" if len(problems) > 5 else "")
        raise TaskFileError(f"{where}: {shown}") from e


def load_tasks(path: str) -> list[Task]:
    """Read tasks from a .jsonl or .parquet file; a bad row raises TaskFileError saying where."""
    fmt = _format_of(path)
    tasks: list[Task] = []
    try:
        if fmt == "jsonl":
            with fsspec.open(path, "rb", compression="infer") as f:
                for n, raw in enumerate(f, 1):
                    try:
                        line = raw.decode("utf-8-sig" if n == 1 else "utf-8")  # (a byte-order mark is allowed)
                    except UnicodeDecodeError as e:
                        raise TaskFileError(
                            f"{path} line {n}: not UTF-8 text (byte 0x{raw[e.start]:02x} at column {e.start + 1}); "
                            "save the file as UTF-8"
                        ) from e
                    if not line.strip():
                        continue
                    try:
                        row = json.loads(line)
                    except json.JSONDecodeError as e:
                        raise TaskFileError(f"{path} line {n}: not JSON ({e.msg})") from e
                    except (ValueError, RecursionError) as e:  # (an integer of 4,300+ digits; nesting past the stack)
                        refused = f"{type(e).__name__}: {e}"
                        raise TaskFileError(f"{path} line {n}: JSON this reader refuses ({refused})") from e
                    if not isinstance(row, dict):
                        raise TaskFileError(f"{path} line {n}: expected a JSON object per line")
                    tasks.append(_validate(row, f"{path} line {n}"))
        else:
            with fsspec.open(path, "rb") as f:
                data = f.read()  # arrow reads from memory: no Python file object in its IO threads
            table = pq.read_table(pa.BufferReader(data))
            for n, row in enumerate(table.to_pylist(), 1):
                row.pop("source", None)
                row.pop("difficulty", None)
                for k in JSON_COLUMNS:
                    if isinstance(row.get(k), str):
                        try:
                            row[k] = json.loads(row[k])
                        except (ValueError, RecursionError) as e:
                            raise TaskFileError(f"{path} row {n}: column {k} is not JSON text ({e})") from e
                tasks.append(_validate({k: v for k, v in row.items() if v is not None}, f"{path} row {n}"))
    except FileNotFoundError as e:
        raise TaskFileError(f"{path}: no such file") from e
    except (pa.ArrowInvalid, OSError) as e:
        raise TaskFileError(f"{path}: cannot read as {fmt}: {e}") from e
    ids = [t.id for t in tasks]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise TaskFileError(f"{path}: task id {dup!r} appears more than once; ids must be unique")
    return tasks
