"""pytest's cache of rewritten test modules, written into an environment when it is built."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from _pytest.assertion import rewrite

from dojo.sandbox import rewritten_tests
from dojo.sandbox.languages import default_python

TEST_MODULE = "def test_sum():\n    total = 1 + 1\n    assert total == 3\n"


def _tree(site: Path) -> None:
    (site / "pkg" / "tests").mkdir(parents=True)
    (site / "pkg" / "__init__.py").write_text("")
    (site / "pkg" / "mod.py").write_text("def f():\n    assert False\n")
    (site / "pkg" / "tests" / "test_sum.py").write_text(TEST_MODULE)
    (site / "pkg" / "tests" / "conftest.py").write_text("X = 1\n")
    (site / "pkg" / "tests" / "test_bad_syntax.py").write_text("def broken(:\n")


def _cached(path: Path) -> Path:
    return path.parent / "__pycache__" / (path.name[:-3] + rewrite.PYC_TAIL)


def test_test_modules_get_the_rewrite_pytest_reads_back_and_nothing_else_does(tmp_path: Path) -> None:
    _tree(tmp_path)
    assert rewritten_tests.write_cache(tmp_path) == 2
    test = tmp_path / "pkg" / "tests" / "test_sum.py"
    assert _cached(tmp_path / "pkg" / "tests" / "conftest.py").exists()
    assert not _cached(tmp_path / "pkg" / "mod.py").exists()  # not a test module: pytest never rewrites it
    assert not _cached(tmp_path / "pkg" / "tests" / "test_bad_syntax.py").exists()
    code = rewrite._read_pyc(test, _cached(test))
    assert code is not None
    namespace: dict[str, object] = {}
    exec(code, namespace)
    with pytest.raises(AssertionError, match=r"assert 2 == 3"):  # pytest's explanation: the rewritten asserts
        namespace["test_sum"]()  # type: ignore[operator]
    test.write_text(TEST_MODULE.replace("== 3", "== 2"))  # other contents (a test file with canaries in it)
    assert rewrite._read_pyc(test, _cached(test)) is None  # are rewritten anew, never taken from the cache


def test_a_folder_without_pytest_gets_no_cache(tmp_path: Path) -> None:
    _tree(tmp_path)
    run = subprocess.run(
        [default_python(), "-I", "-S", rewritten_tests.__file__, str(tmp_path)], capture_output=True, text=True
    )  # as the environment's build runs it; -S: no site-packages (nor a pytest in them); the folder holds none
    assert run.returncode == 0 and run.stdout.strip() == "0"
    assert not list(tmp_path.rglob("*.pyc"))
