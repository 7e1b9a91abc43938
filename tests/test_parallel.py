"""The suite on workers (tests/parallel.py): what a worker leaves is removed at the run's end."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_a_worker_killed_mid_run_leaves_no_temporary_directory(tmp_path: Path) -> None:
    """A worker ended without its own clean-up (the watchdog's ``_exit``; here SIGKILL) had left its
    ``dojo-tests-*`` directory behind; the controller removes its workers' directories at its end."""
    (tmp_path / "test_dies.py").write_text(
        "import os\n\n\ndef test_lives():\n    pass\n\n\ndef test_dies():\n    os.kill(os.getpid(), 9)\n"
    )
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "DOJO_TESTS_"))}
    env.update(TMPDIR=str(temp), PYTHONPATH=str(REPO))
    ini, tests = tmp_path / "pytest.ini", tmp_path / "test_dies.py"
    command = [sys.executable, "-m", "pytest", "-q", "-p", "tests.conftest", "-n", "2", "--max-worker-restart", "0",
               "--rootdir", str(tmp_path), "-c", str(ini), str(tests)]  # fmt: skip
    nested = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, start_new_session=True)  # fmt: skip
    try:
        said, _ = nested.communicate(timeout=240)
    finally:  # (a run that hangs goes with its workers: its whole group)
        if nested.poll() is None:
            os.killpg(nested.pid, signal.SIGKILL)
            nested.communicate()
    assert nested.returncode != 0 and "crashed" in said, said  # (the worker did die mid-run)
    assert [p.name for p in temp.iterdir() if p.name.startswith("dojo-tests-")] == [], said
