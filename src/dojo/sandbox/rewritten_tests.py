"""Writes pytest's cache of assertion-rewritten test modules into an environment being built.

Run as a script by the sandbox's interpreter, on a ``site-packages`` folder that is not yet published:
``python -I -S rewritten_tests.py SITE``. It imports nothing but the standard library and the
environment's own pytest (``SITE/_pytest``); without one it writes nothing.

Why: a repo task's run imports every test module it names, and pytest rewrites each one's asserts
on import (parsing it, walking its tree, compiling it), because a run writes no cache (its files are
read-only and its bytecode is off): profiled in the sandbox, a swe:toolz reference run spent
0.29 s collecting its tests with the rewriting and 0.14 s without, about a tenth of the run's wall
time. pytest reads a cached rewrite when one lies in the module's ``__pycache__`` and was made
from the same source bytes (it checks a hash of the source, not a time), so an environment that
holds them saves the work in every run, and a test file that a run writes with other contents (a
task's tests with canaries in them) is rewritten as before.

Each cached file is read back through pytest's own reader before it is kept: a pytest whose cache
format differs from what this writes gets none, never a wrong one."""

from __future__ import annotations

import ast
import fnmatch
import importlib.util
import os
import sys
from pathlib import Path

TEST_FILES = ("test_*.py", "*_test.py", "conftest.py")  # pytest's default python_files, and conftests


def is_test_file(path: Path) -> bool:
    """Whether pytest rewrites ``path`` when a run imports it (by the default patterns)."""
    return any(fnmatch.fnmatch(path.name, pattern) for pattern in TEST_FILES)


def write_cache(site: Path) -> int:
    """Write the rewritten code of each test file under ``site``; returns how many were written."""
    sys.path.insert(0, str(site))
    try:
        from _pytest.assertion import rewrite
    except ImportError:
        return 0
    written = 0
    for path in sorted(site.rglob("*.py")):
        if not is_test_file(path) or path.is_symlink():
            continue
        source = path.read_bytes()
        try:
            tree = ast.parse(source, filename=str(path))
            rewrite.rewrite_asserts(tree, source, str(path), None)
            code = compile(tree, str(path), "exec", dont_inherit=True)
        except (SyntaxError, ValueError):
            continue  # (a test's sample of bad syntax: pytest never imports it either)
        cache = path.parent / "__pycache__"
        cache.mkdir(exist_ok=True)
        pyc = cache / (path.name[:-3] + rewrite.PYC_TAIL)
        try:
            with open(pyc, "wb") as f:
                rewrite._write_pyc_fp(f, importlib.util.source_hash(source), code)
            if rewrite._read_pyc(path, pyc) is None:
                raise ValueError("pytest does not read it back")
        except Exception:  # another pytest's cache format: no cache at all rather than a wrong one
            pyc.unlink(missing_ok=True)
            return written
        written += 1
    return written


def main() -> None:
    if len(sys.argv) != 2 or not os.path.isdir(sys.argv[1]):
        sys.exit("usage: rewritten_tests.py SITE_PACKAGES_FOLDER")
    print(write_cache(Path(sys.argv[1])))


if __name__ == "__main__":
    main()
