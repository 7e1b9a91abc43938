"""The repo plugin: a pytest plugin each run of a ``repo`` task gets next to its report
(``.dojo/dojo_scored.py``). Before the report is written, it kills every process started since it
loaded (a child of the candidate's that would rewrite the report once pytest wrote it). Once every
scored test has failed, the tests after them (the guards) are not run: they cannot change a score
of 0 (``dojo.rewards.repo._score_guarded``). Only a failure counts (a skip, an xfail or an xpass
stops nothing), so no score changes. It ends the run loop itself: pytest's own stop
(``session.shouldstop``) is an interruption whose report parses the failing test's source again
(~0.25 s for pyflakes' test files).
"""

# ruff: noqa: SIM105 (plain try/except: contextlib would be one more module in the sandbox)

from __future__ import annotations  # (the annotations name pytest's types: older pytests lack some)

import json
import os
import signal
import time
from typing import Any

import pytest

SCORED = set(json.loads(os.environ.get("DOJO_SCORED") or "[]"))
failed: set[str] = set()
# The slot's own processes, listed when pytest loads this plugin: before any code of the tree runs.
BEFORE = {name for name in os.listdir("/proc") if name.isdigit()}


def _started_since() -> list[int]:
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit() and name not in BEFORE:
            try:
                with open("/proc/" + name + "/stat") as f:
                    state = f.read().rpartition(")")[2].split()[0]
            except (OSError, IndexError):
                continue
            if state not in "ZX":
                out.append(int(name))
    return out


@pytest.hookimpl(tryfirst=True)
def pytest_assertrepr_compare(config: pytest.Config, op: str, left: Any, right: Any) -> list[str]:
    # Only a failure's first line is read (junit_outcomes): pytest's diff of the two sides (pprint
    # and difflib, ~7 ms a failure for toolz's dicts, 20 copies of a canaried test) is not made.
    # Its traceback of the failure still is: made without it (a plugin's repr_failure), the
    # reference of a bug that dill's test_diff catches failed (that test keys a memo by id(), and a
    # canary copy's objects were freed at another time, their ids taken by the twin's).
    from _pytest._io.saferepr import saferepr

    return [saferepr(left) + " " + op + " " + saferepr(right)]


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    # Before pytest writes the report: every process started since this plugin loaded (the
    # candidate's children, double-forked or stopped ones too) is killed and gone, so that none can
    # rewrite the report once it is written.
    deadline = time.monotonic() + 5
    while (alive := _started_since()) and time.monotonic() < deadline:
        for pid in alive:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            pass
        time.sleep(0.002)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.nodeid in SCORED and report.failed:
        failed.add(report.nodeid)
    elif report.nodeid in SCORED and report.when == "call":
        SCORED.clear()  # one that did not fail: run everything


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> bool | None:
    if not SCORED or session.testsfailed or session.config.option.collectonly:
        return None  # pytest's own loop
    for i, item in enumerate(session.items):
        nextitem = session.items[i + 1] if i + 1 < len(session.items) else None
        item.config.hook.pytest_runtest_protocol(item=item, nextitem=nextitem)
        if session.shouldfail:
            raise session.Failed(session.shouldfail)
        if session.shouldstop:
            raise session.Interrupted(session.shouldstop)
        if SCORED and failed >= SCORED:
            break  # every scored test failed
    return True
