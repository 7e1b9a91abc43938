from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from dojo.tasks import Message, Task, TaskFileError, TestCase, load_source, load_tasks, save_tasks


def test_form_rules_are_enforced_with_clear_messages() -> None:
    with pytest.raises(ValidationError, match="needs entry_point"):
        Task(id="x", form="function", prompt="p", tests=[TestCase(args=[1], expected=1)])
    with pytest.raises(ValidationError, match="at least one test"):
        Task(id="x", form="stdio", prompt="p")
    with pytest.raises(ValidationError, match="check"):
        Task(id="x", form="assert", prompt="p", entry_point="f", tests=[TestCase()])
    with pytest.raises(ValidationError, match="JSON data"):
        TestCase(args=[object()])


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet", ".jsonl.gz"])
def test_round_trip_every_form(tmp_path: Path, suffix: str) -> None:
    tasks = [
        *load_source("humaneval")[:3],
        *load_source("humaneval:function")[:3],
        *load_source("reasoning_gym:gcd?n=2&level=3"),
        *load_source("family:expressions?n=3"),
        # (each form's own fields: a workspace, a document, tools, an api, an environment; Parquet had
        # dropped them, and such tasks did not load back)
        *load_source("family:documents?n=2"),
        *load_source("family:terminal?n=2"),
        *load_source("family:data_analysis?n=2"),
        *load_source("family:scene3d?n=2"),
        *load_source("bfcl:multi_turn_base?n=2"),
        Task(
            id="chat",
            form="stdio",
            prompt=[Message(role="system", content="be brief"), Message(role="user", content="echo")],
            tests=[TestCase(stdin="a", expected="a")],
            language="bash",
        ),
    ]
    path = str(tmp_path / f"tasks{suffix}")
    assert save_tasks(tasks, path) == len(tasks)
    assert load_tasks(path) == tasks


def test_bad_files_say_where_and_what(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        '{"id": "a", "form": "answer", "prompt": "q", "tests": [{"expected": "1"}]}\n{"id": "b", "form": "nope"}\n'
    )
    with pytest.raises(TaskFileError, match=r"bad.jsonl line 2: form"):
        load_tasks(str(bad))
    # a Parquet file from another writer whose JSON column holds plain text says where
    import pyarrow as pa
    import pyarrow.parquet as pq

    plain = tmp_path / "plain.parquet"
    pq.write_table(pa.table({"id": ["a"], "form": ["answer"], "prompt": ["what is 2+2?"]}), plain)
    with pytest.raises(TaskFileError, match=r"plain.parquet row 1: column prompt is not JSON text"):
        load_tasks(str(plain))
    # every problem of a line is said, not the first and a count
    bad.write_text('{"id": "x", "form": "function", "prompt": "p", "entry_point": 3, "tests": [{"args": 1}]}\n')
    with pytest.raises(TaskFileError, match=r"line 1: entry_point: .*string; tests\.0\.args: .*list$"):
        load_tasks(str(bad))
    bad.write_text("{not json\n")
    with pytest.raises(TaskFileError, match="line 1: not JSON"):
        load_tasks(str(bad))
    dup = tmp_path / "dup.jsonl"
    one = '{"id": "a", "form": "answer", "prompt": "q", "tests": [{"expected": "1"}]}\n'
    dup.write_text(one * 2)
    with pytest.raises(TaskFileError, match="appears more than once"):
        load_tasks(str(dup))
    with pytest.raises(TaskFileError, match="no such file"):
        load_tasks(str(tmp_path / "missing.parquet"))
    with pytest.raises(TaskFileError, match=r"use a \.jsonl or \.parquet"):
        load_tasks(str(tmp_path / "tasks.csv"))


def test_source_strings_are_validated() -> None:
    with pytest.raises(ValueError, match="unknown task source"):
        load_source("mbpp")
    with pytest.raises(ValueError, match="unknown reasoning-gym families"):
        load_source("reasoning_gym:nonsense")
    with pytest.raises(ValueError, match="option n must be an integer"):
        load_source("family:expressions?n=many")
    with pytest.raises(ValueError, match="unknown option"):
        load_source("humaneval?n=3")
    with pytest.raises(ValueError, match="unknown task family"):
        load_source("family:nope")
