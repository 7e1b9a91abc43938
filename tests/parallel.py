"""The suite on several worker processes (pytest-xdist, ``make test``): what keeps workers apart.

The suite waits more than it computes (a sequential run kept this machine's 2 cores ~50% busy on
2026-12-07: 1,069 s), so ``make test`` runs it on two workers. Each worker gets:

- a temporary directory of its own (``TMPDIR``), set before anything reads ``tempfile.gettempdir``,
  so that the leak check (``tests/leaks.py``), which names every new entry there, sees its own
  tests' entries only; the controller removes what is left of them at its end, a worker's that
  the watchdog ended before it could (``remove_workers_temp_dirs``);
- whole files (their module fixtures built once), and the Ray cluster tests together (one local
  cluster at a time: ``tests/cluster/conftest.py``), by a scheduler of its own (``FileScheduling``,
  xdist's file scheduling with shared scopes): xdist's own groups (``--dist loadgroup`` and
  ``xdist_group`` marks) did nothing here, as its worker hook runs before this conftest's and
  pytest 9 ignores the node id it rewrites (a review, 2026-12-07);
- what it left behind at its end (``send_leftovers``), sent back to the controller, which fails the run
  for it (a worker's own exit status never reaches the controller).
"""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")  # "" in a run without workers
# This run's token, in its workers' temporary directories' names: a controller draws its own (an
# inherited one could be another run's, whose directories it would remove), its workers read it.
RUN = os.environ.get("DOJO_TESTS_RUN", "") if WORKER else secrets.token_hex(4)
os.environ["DOJO_TESTS_RUN"] = RUN
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
    path = Path(tempfile.mkdtemp(prefix=f"dojo-tests-{RUN}-{WORKER}-", dir=tempfile.gettempdir()))
    path.chmod(0o1777)
    os.environ["TMPDIR"] = str(path)
    tempfile.tempdir = None  # gettempdir() reads TMPDIR again
    return path


def remove_temp_dir(path: Path | None) -> None:
    if path is not None:
        shutil.rmtree(path, ignore_errors=True)


def remove_workers_temp_dirs() -> None:
    """On the controller, its workers down: their temporary directories, also one whose worker ended
    before its own removal ran (the faulthandler watchdog ends a frozen worker with ``_exit``)."""
    if not WORKER:
        for path in Path(tempfile.gettempdir()).glob(f"dojo-tests-{RUN}-*"):
            shutil.rmtree(path, ignore_errors=True)


def _scope(nodeid: str) -> str:
    path = nodeid.split("::", 1)[0]
    return next((name for prefix, name in SHARED.items() if path.startswith(prefix)), path)


def make_scheduler(config: pytest.Config, log: Any) -> Any:
    """The controller's scheduler where the run distributes by file (``make test``: ``--dist
    loadfile``): xdist's file scheduling, but the files of a ``SHARED`` prefix are one unit of work,
    handed out in the workers' order (``place``)."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    config.option.loadscopereorder = False  # (xdist puts the files with most tests first: the soak came last)

    class FileScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _scope(nodeid)

    return FileScheduling(config, log)


def _rank(nodeid: str) -> int:
    return next((i for i, p in enumerate(LONGEST_FIRST) if nodeid.startswith(p)), len(LONGEST_FIRST))


def place(items: list[pytest.Item]) -> None:
    """On a worker: the longest files first (the order within a file is kept: the sort is stable);
    the controller hands out units of work in this order."""
    if WORKER:
        items.sort(key=lambda item: _rank(item.nodeid))


def has_workers(config: pytest.Config) -> bool:
    """Whether this process is the controller of workers (``-n``, or ``--tx``)."""
    return not WORKER and config.pluginmanager.has_plugin("dsession")


def send_leftovers(config: pytest.Config, leaks: list[str], left: list[str]) -> None:
    """On a worker: its tests' leaks (listed where ``DOJO_LEAKS=report``) and the processes its
    session left, for the controller (``take_leftovers``)."""
    workeroutput = getattr(config, "workeroutput", None)
    if WORKER and workeroutput is not None:
        workeroutput["dojo_leaks"], workeroutput["dojo_left"] = list(leaks), list(left)


def take_leftovers(node: Any) -> tuple[list[str], list[str]]:
    """On the controller: what a worker that went down sent (``send_leftovers``)."""
    output = getattr(node, "workeroutput", None) or {}
    return list(output.get("dojo_leaks", [])), list(output.get("dojo_left", []))
