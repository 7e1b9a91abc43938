"""The suite on several worker processes (pytest-xdist, ``make test``): what keeps workers apart.

The suite waits more than it computes (a sequential run kept this machine's 2 cores ~50% busy on
2026-12-07: 1,069 s), so ``make test`` runs it on two workers. Each worker gets:

- a temporary directory of its own (``TMPDIR``), set before anything reads ``tempfile.gettempdir``,
  so that the leak check (``tests/leaks.py``), which names every new entry there, sees its own
  tests' entries only;
- whole files (their module fixtures built once), and the Ray cluster tests together (one local
  cluster at a time: ``tests/cluster/conftest.py``), through ``--dist loadgroup``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")  # "" in a run without workers
# Files that share one resource of the machine run on one worker, one after the other.
SHARED = {"tests/cluster/": "ray-cluster"}
# The longest files first (a sequential run's durations, 2026-12-07), so that no worker is left with
# a long one at the end while the other idles: the rootless rerun 125 s, the soak 97, training 53.
LONGEST_FIRST = (
    "tests/sandbox/test_rootless.py",
    "tests/service/test_soak.py",
    "tests/cli/test_train.py",
    "tests/tasks/test_tau2_parity.py",
    "tests/sandbox/test_languages.py",
    "tests/cluster/",
    "tests/rewards/test_repo_forgeries.py",
)


def own_temp_dir() -> Path | None:
    """On a worker, a fresh temporary directory for its whole run (open to every user, as /tmp is:
    sandboxes and the rootless rerun write there as other users); None without workers."""
    if not WORKER:
        return None
    path = Path(tempfile.mkdtemp(prefix=f"dojo-tests-{WORKER}-", dir=tempfile.gettempdir()))
    path.chmod(0o1777)
    os.environ["TMPDIR"] = str(path)
    tempfile.tempdir = None  # gettempdir() reads TMPDIR again
    return path


def remove_temp_dir(path: Path | None) -> None:
    if path is not None:
        shutil.rmtree(path, ignore_errors=True)


def _group(nodeid: str) -> str:
    path = nodeid.split("::", 1)[0]
    return next((name for prefix, name in SHARED.items() if path.startswith(prefix)), path)


def _rank(nodeid: str) -> int:
    return next((i for i, p in enumerate(LONGEST_FIRST) if nodeid.startswith(p)), len(LONGEST_FIRST))


def place(items: list[pytest.Item]) -> None:
    """On a worker: each test joins its file's group (or a shared resource's), longest files first.
    The order within a file is kept (the sort is stable)."""
    if not WORKER:
        return
    for item in items:
        item.add_marker(pytest.mark.xdist_group(_group(item.nodeid)))
    items.sort(key=lambda item: _rank(item.nodeid))
