"""The command line: runs a file in the sandbox; bad arguments exit 2 with a message."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from dojo.cli import app
from tests.sandbox.conftest import SKIP_REASON

runner = CliRunner()


def test_run_prints_output_and_exits_by_verdict(tmp_path: Path) -> None:
    if SKIP_REASON:
        pytest.skip(SKIP_REASON)
    ok = tmp_path / "ok.py"
    ok.write_text("print(input() * 2)\n")
    stdin = tmp_path / "in.txt"
    stdin.write_text("ab\n")
    result = runner.invoke(app, ["run", str(ok), "--stdin", str(stdin)])
    assert result.exit_code == 0 and "abab" in result.output
    bad = tmp_path / "bad.py"
    bad.write_text("raise SystemExit(3)\n")
    result = runner.invoke(app, ["run", str(bad)])
    assert result.exit_code == 1 and "RuntimeError" in result.output


def test_every_languages_own_suffix_names_it() -> None:
    """Six suffixes had been guessed of 25 languages: `dojo run Main.java` could not guess Java."""
    from dojo.cli.sandbox import SUFFIXES
    from dojo.sandbox.languages import LANGUAGES

    shared = {"pytest": "python", "go_test": "go", "junit": "java", "jest": "typescript"}  # (one suffix, two)
    for name, lang in LANGUAGES.items():
        assert SUFFIXES[Path(lang.source_file).suffix] == shared.get(name, name), name
    assert (SUFFIXES[".cc"], SUFFIXES[".r"]) == ("cpp", "r")


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["run", "missing.py"], "the program 'missing.py' does not exist"),
        (["run", "{tmp}"], "is a directory; give a file"),
        (["run", "{tmp}/x.py", "--stdin", "{tmp}/none.txt"], "--stdin"),
        (["run", "{tmp}/x.py", "--network", "bogus:xx"], "network.allow: network allow entry 'bogus:xx': the port"),
        (["serve", "--network-allow", "bogus:xx"], "the port must be a number"),
        (["run", "{tmp}/x.txt"], "cannot guess the language"),
        (["run", "{tmp}/x.py", "--language", "cobol"], "unknown language"),
        (["run", "{tmp}/x.py", "--environment", "no-such-env"], "no environment named 'no-such-env'"),
        (["run", "{tmp}/x.py", "--memory-mb", "1"], "--memory-mb"),
        (["run", "{tmp}/x.py", "--wall-time", "-3"], "--wall-time"),
        (["serve", "--host", "10.0.0.1"], "without a token"),
    ],
)
def test_bad_arguments_exit_2_with_a_message(tmp_path: Path, args: list[str], needle: str) -> None:
    (tmp_path / "x.txt").write_text("x")
    (tmp_path / "x.py").write_text("print(1)")
    result = runner.invoke(app, [a.format(tmp=tmp_path) for a in args], env={"DOJO_TOKEN": ""})
    assert result.exit_code == 2
    assert needle in result.output


def test_a_port_in_use_is_refused_before_anything_starts(tmp_path: Path) -> None:
    """uvicorn had said so only after the sandbox had started, in a log line; the dashboard had first
    printed an address that led to whatever held the port."""
    import socket

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        for args in (["serve", "--port", str(port)], ["dashboard", str(tmp_path / "run"), "--port", str(port)]):
            result = runner.invoke(app, args, env={"DOJO_TOKEN": ""})
            assert result.exit_code == 2 and f"port {port} on 127.0.0.1 is in use" in result.output, result.output
