"""What a trusted process of a run does before a candidate's code can reach it: the grading
harness's (``dojo.rewards.programs.harness``), the shell check's
(``dojo.rewards.programs.shell_check``) and ``/run_jupyter``'s driver
(``dojo.service.jupyter_driver``), each of which decides or reports a verdict in the sandbox while
a candidate's code runs beside it, and each shipped with this module (``dojo.sandbox.bundle``).

Runs inside the sandbox: standard library only.
"""

from __future__ import annotations

import os
import sys
from typing import Any

PR_GET_DUMPABLE, PR_SET_DUMPABLE = 3, 4


def trusted_folder(path: str) -> str | None:
    """``path``'s real path if no process of the run can change what is in it (it exists, and
    neither it nor any folder above it is writable by this uid); None otherwise."""
    if not path or not os.path.exists(path):
        return None
    real = os.path.realpath(path)
    p = real
    while True:
        if os.access(p, os.W_OK):
            return None
        parent = os.path.dirname(p)
        if parent == p:
            return real
        p = parent


def trusted_path(entries: list[str]) -> list[str]:
    """``sys.path`` for the trusted process while the candidate's code runs: only folders it cannot
    change (``trusted_folder``). The candidate can write /box (the path's first entry, and ``''``:
    the run's working directory), and a module it leaves there must never be what an import here
    finds: the values codec imports base64 on the first bytes value, after the candidate's code has
    run (a ``/box/base64.py`` was run in the harness's trusted process before this), and the shell
    check's ``tarfile.open`` imports gzip on the first ``.tar.gz`` it describes (a script's
    ``/box/gzip.py`` forged its report, found 2026-12-06). An entry that does not exist yet
    (``PYTHONPATH=lib``, where the candidate may make ``/box/lib`` later) is left off too."""
    return [p for p in map(trusted_folder, entries) if p is not None]


def use_trusted_path() -> None:
    """This process's ``sys.path`` made ``trusted_path``'s: before any import of its own after a
    candidate's file may be in /box."""
    sys.path[:] = trusted_path(sys.path)


def make_undumpable(libc: Any) -> bool:
    """This process non-dumpable, so that no process of its uid (a candidate's) can open its
    ``/proc`` files: its memory, its descriptors (its stdout, where it reports, among them). The
    zygote starts a protected run so (``AsyncSandbox.run(harness=True)``), but an ``execve`` (strict
    isolation: a fresh interpreter) makes it dumpable again. ``libc``: a ``ctypes`` library with
    ``prctl``. False where it could not be undone: the caller must not go on."""
    if libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) != 0:
        libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    return bool(libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 0)
