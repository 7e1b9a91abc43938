"""``dojo tasks``: audit exits 1 on unverifiable sets and writes a JSON report; export writes files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dojo.cli import app
from dojo.tasks import Task, TestCase, load_source, load_tasks, save_tasks
from tests.sandbox.conftest import SKIP_REASON

runner = CliRunner()


def test_export_then_audit_a_good_set(tmp_path: Path) -> None:
    if SKIP_REASON:
        pytest.skip(SKIP_REASON)
    out = tmp_path / "expr.parquet"
    result = runner.invoke(app, ["tasks", "export", "family:expressions?n=6&seed=2", str(out)])
    assert result.exit_code == 0 and "wrote 6 tasks" in result.output
    assert len(load_tasks(str(out))) == 6
    report = tmp_path / "report.json"
    result = runner.invoke(app, ["tasks", "audit", str(out), "--json", str(report), "--all", "--pool-size", "2"])
    assert result.exit_code == 0, result.output
    data = json.loads(report.read_text())
    assert data["summary"]["verifiable"] == 6 and len(data["tasks"]) == 6
    said = " ".join(result.output.split())  # (the console wraps lines)
    assert f"audited in {data['summary']['seconds']} s (the tasks loaded in " in said, said  # the two phases' times


def test_audit_exits_1_when_a_task_is_unverifiable(tmp_path: Path) -> None:
    if SKIP_REASON:
        pytest.skip(SKIP_REASON)
    bad = Task(
        id="bad",
        form="function",
        prompt="f",
        entry_point="f",
        tests=[TestCase(args=[1], expected=2)],
        reference="def f(x):\n    return x",
    )
    path = tmp_path / "bad.jsonl"
    save_tasks([bad], str(path))
    result = runner.invoke(app, ["tasks", "audit", str(path)])
    assert result.exit_code == 1
    assert "reference_fails" in result.output and "1 unverifiable" in result.output


def test_a_long_list_of_findings_shows_the_problems_first_and_says_how_many_more(tmp_path: Path) -> None:
    if SKIP_REASON:
        pytest.skip(SKIP_REASON)
    same = [Task(id=f"dup{i}", form="answer", prompt="What is two plus two, written as a number?",
                 tests=[TestCase(expected=f"{i}")], reference=f"{i}") for i in range(50)]  # fmt: skip
    bad = Task(id="zz-bad", form="answer", prompt="Unrelated", tests=[TestCase(expected="1")], reference="2")
    path = tmp_path / "many.jsonl"
    save_tasks([*same, bad], str(path))
    result = runner.invoke(app, ["tasks", "audit", str(path)])
    assert result.exit_code == 1, result.output
    assert result.output.index("zz-bad") < result.output.index("dup0")  # the problem before the warnings
    assert "... 11 " in result.output and "dup49" not in result.output  # ("... 11 more", wrapped in its cell)


def test_audit_lists_bfcl_tasks_whose_possible_answer_is_malformed(tmp_path: Path) -> None:
    if SKIP_REASON:
        pytest.skip(SKIP_REASON)
    keep = {"bfcl:simple_java_0", "bfcl:simple_java_36", "bfcl:simple_java_64"}
    path = tmp_path / "java.jsonl"
    save_tasks([t for t in load_source("bfcl:simple_java?all=1") if t.id in keep], str(path))
    result = runner.invoke(app, ["tasks", "audit", str(path)])
    assert result.exit_code == 1, result.output
    assert "1 verifiable" in result.output and "2 unverifiable" in result.output
    listing = result.output[result.output.index("possible answer malformed (2): ") :].replace("\n", "")
    assert "bfcl:simple_java_36, bfcl:simple_java_64" in listing


def test_bad_sources_exit_2_with_a_message(tmp_path: Path) -> None:
    result = runner.invoke(app, ["tasks", "audit", "no-such-source"])
    assert result.exit_code == 2 and "unknown task source" in result.output
    result = runner.invoke(app, ["tasks", "export", "humaneval", str(tmp_path / "out.csv")])
    assert result.exit_code == 2 and ".jsonl or .parquet" in result.output
    result = runner.invoke(app, ["tasks", "audit", "humaneval", "--repeats", "0"])
    assert result.exit_code == 2


def test_export_never_replaces_a_file_unasked_and_never_its_own_source(tmp_path: Path) -> None:
    """An existing OUT had been replaced without a word, the source itself too (``export a.jsonl
    a.jsonl --limit 1`` kept one task of two)."""
    src = tmp_path / "two.jsonl"
    assert runner.invoke(app, ["tasks", "export", "family:expressions?n=2", str(src)]).exit_code == 0
    same = runner.invoke(app, ["tasks", "export", str(src), str(src), "--limit", "1", "--force"])
    assert same.exit_code == 2 and "is the source" in same.output and len(load_tasks(str(src))) == 2
    other = tmp_path / "other.jsonl"
    other.write_text("keep me\n")
    kept = runner.invoke(app, ["tasks", "export", "family:arith?n=1", str(other)])
    assert kept.exit_code == 2 and "--force" in kept.output and other.read_text() == "keep me\n"
    forced = runner.invoke(app, ["tasks", "export", "family:arith?n=1", str(other), "--force"])
    assert forced.exit_code == 0 and len(load_tasks(str(other))) == 1


def test_what_the_user_typed_is_shown_as_typed_and_bad_files_say_where(tmp_path: Path) -> None:
    """Error messages went through Rich markup: ``exp[v2]/t.jsonl`` was shown as ``exp/t.jsonl``,
    and ``family:[/x]`` ended in a MarkupError traceback. A --json path that cannot be written is
    refused before the audit runs (its result had been lost to a traceback after it). A file that is
    not UTF-8 names its line."""
    typed = runner.invoke(app, ["tasks", "export", "exp[v2]/tasks.jsonl", str(tmp_path / "o.jsonl")])
    assert typed.exit_code == 2 and "exp[v2]/tasks.jsonl" in typed.output, typed.output
    tag = runner.invoke(app, ["tasks", "export", "family:[/x]", str(tmp_path / "o.jsonl")])
    assert tag.exit_code == 2 and "[/x]" in tag.output, tag.output  # (a MarkupError had been exit code 1)
    for bad in (tmp_path, tmp_path / "no-dir" / "r.json"):
        refused = runner.invoke(app, ["tasks", "audit", "family:expressions?n=1", "--json", str(bad)])
        assert refused.exit_code == 2 and "--json" in refused.output and "auditing" not in refused.output, bad
    latin = tmp_path / "latin.jsonl"
    save_tasks(load_source("family:expressions?n=1"), str(tmp_path / "one.jsonl"))
    row = json.loads((tmp_path / "one.jsonl").read_text().splitlines()[0])
    second = {**row, "id": row["id"] + "-b", "prompt": "caf\u00e9 " + row["prompt"]}
    in_latin_1 = json.dumps(second).encode().replace(b"\\u00e9", b"\xe9")
    latin.write_bytes(json.dumps(row).encode() + b"\n" + in_latin_1 + b"\n")
    read = runner.invoke(app, ["tasks", "export", str(latin), str(tmp_path / "x.parquet")])
    assert read.exit_code == 2 and "line 2: not UTF-8 text (byte 0xe9" in read.output, read.output
    for source, said in (("ifbench?n=-1", "option n must be"), ("family:arith?n=10000000", "option n must be"),
                         ("family:expressions?n=1&difficulty=0.2-0.5-0.9", "difficulty must be")):  # fmt: skip
        result = runner.invoke(app, ["tasks", "export", source, str(tmp_path / "y.jsonl")])
        assert result.exit_code == 2 and said in result.output, (source, result.output)


def test_a_bugs_file_of_another_shape_says_what_it_should_hold(tmp_path: Path) -> None:
    """``[1]`` or ``{"nobugs": 1}`` as a mining's data had been an AttributeError, KeyError or
    TypeError traceback (the canaries command would have started a sandbox first)."""
    (tmp_path / "list.json").write_text("[1]")
    (tmp_path / "other.json").write_text('{"nobugs": 1}')
    (tmp_path / "ok.json").write_text('{"bugs": []}')
    for args in (["swe-refill", "toolz", str(tmp_path / "list.json"), "--data", str(tmp_path / "ok.json")],
                 ["swe-canaries", "toolz", "--data", str(tmp_path / "other.json")]):  # fmt: skip
        result = runner.invoke(app, ["tasks", *args])
        assert result.exit_code == 2 and "expected an object with a 'bugs' list" in result.output, result.output


def _bug(line: int, canary: bool) -> dict[str, object]:
    bug: dict[str, object] = {
        "file": "toolz/itertoolz.py",
        "line": line,
        "mutated": f"x = {line}\n",
        "id": f"{line:04d}",
    }
    if canary:
        bug["canary"] = {"test": "toolz/tests/test_itertoolz.py::test_x", "site": 0, "avoid": []}
    return bug


def test_swe_refill_trades_bugs_without_canaries_for_mined_ones_with(tmp_path: Path) -> None:
    """Bugs without canaries give way to canaried bugs of another mining that the data does not
    hold (as many as it has), under their ids; files of another version are refused."""
    head = {"package": "toolz", "distributions": ["toolz==1.2.0"], "mined": {"seed": 0}}
    data = {**head, "bugs": [_bug(10, True), _bug(20, False), _bug(30, False), _bug(40, False)]}
    extra = {**head, "mined": {"seed": 1}, "bugs": [_bug(10, True), _bug(25, True), _bug(35, False), _bug(45, True)]}
    path, more = tmp_path / "toolz.json", tmp_path / "extra.json"
    path.write_text(json.dumps(data))
    more.write_text(json.dumps(extra))
    result = runner.invoke(app, ["tasks", "swe-refill", "toolz", str(more), "--data", str(path)])
    assert result.exit_code == 0, result.output
    assert "replaced 2: 3 of 4 bugs of toolz have canaries" in result.output
    refilled = json.loads(path.read_text())
    assert [(b["line"], "canary" in b) for b in refilled["bugs"]] == [(10, True), (25, True), (45, True), (40, False)]
    assert [b["id"] for b in refilled["bugs"]] == ["0010", "0020", "0030", "0040"]  # 25 and 45 under replaced ids
    assert refilled["mined"]["refilled"] == [{"seed": 1, "replaced": ["0020", "0030"]}]
    more.write_text(json.dumps({**extra, "distributions": ["toolz==1.1.0"]}))
    result = runner.invoke(app, ["tasks", "swe-refill", "toolz", str(more), "--data", str(path)])
    assert result.exit_code != 0 and "not of one package and version" in result.output
    assert json.loads(path.read_text()) == refilled  # nothing lost
