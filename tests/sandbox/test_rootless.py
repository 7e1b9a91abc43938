"""Rootless mode: the whole sandbox suite again, as an unprivileged user, through user namespaces.

Run as root (as CI does), this test drops to ``nobody`` with ``setpriv`` and runs every other test
of this directory (and the grading harness's trust-boundary and judge-attack tests) in that identity; tests of what
only root offers are marked ``root_only``. Left out, for the suite's time (~55 s of its ~170): each
language's stdin test in strict isolation (the fast one runs every toolchain rootless; strict differs
only in a fresh slot per run, which the rest of the directory covers rootless), Go's test runner
(20 s: a cold build cache in nobody's home; Go itself runs in the stdin test), and the JVM's test
runners and Scala's compile error (~23 s as root; the JVM runs rootless in the stdin tests).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NOBODY = 65534


def _nobody_can_run_the_suite() -> str:
    """Why the suite cannot run as nobody here, or "" when it can."""
    if os.geteuid() != 0:
        return "needs root to drop to an unprivileged user (this run already is one)"
    if not shutil.which("setpriv"):
        return "setpriv (util-linux) is missing"
    probe = subprocess.run(
        ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", sys.executable, "-c", "import dojo"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    if probe.returncode != 0:
        return f"the checkout or the interpreter is not readable by uid {NOBODY}: {probe.stderr.strip()[-300:]}"
    return ""


def test_sandbox_suite_passes_without_root() -> None:
    reason = _nobody_can_run_the_suite()
    if reason:
        pytest.skip(reason)
    home = tempfile.mkdtemp(prefix="dojo-rootless-home-")  # its caches go there, and away after
    os.chown(home, NOBODY, NOBODY)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home, "LANG": "C.UTF-8"}
    drop = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    # the sandbox's tests, and the grading harness's trust boundary (a second process per run; the
    # slot's judge, which rootless runs share a user with)
    pytest_args = ["-p", "no:cacheprovider", "-q", "-rs", "tests/sandbox", "tests/rewards/test_harness.py",
                   "tests/rewards/test_judge_attacks.py", "--deselect", __file__,
                   "-k", "not (test_each_language_reads_stdin and strict) and not go_test and not "
                   "(test_test_runners_pass_and_fail and (kotlin_script or junit)) and not "
                   "(test_compile_errors_are_compile_errors and scala)"]  # fmt: skip
    try:
        proc = subprocess.run(
            [*drop, sys.executable, "-m", "pytest", *pytest_args],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
    finally:
        shutil.rmtree(home, ignore_errors=True)
    tail = proc.stdout[-6000:] + proc.stderr[-2000:]
    assert proc.returncode == 0, tail
    assert " passed" in tail and " failed" not in tail, tail
    assert "rootless mode only" not in tail  # the rootless-only tests ran, not skipped
