"""SandboxFusion's ``/run_jupyter``: cells in one Jupyter kernel inside the sandbox. The kernel needs
jupyter_client and ipykernel, which SandboxFusion's environment has (``make fusion-env``; CI builds it
before the suite): these tests skip where it is not built.

The forgery tests (docs/threat-model.md, "/run_jupyter's result") run a solution cell that tries to
forge the driver's result, then a failing check (``assert 1 == 2``): the check's error must be in
the response whatever the solution did."""

from __future__ import annotations

import base64
import json
import secrets
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from dojo.sandbox import ExecutionResult, Verdict
from dojo.sandbox.environment import EnvironmentNotFound, EnvironmentStore
from dojo.service import ServiceSettings
from dojo.service import jupyter as jupyter_service
from dojo.service.fusion import FUSION_ENVIRONMENT
from dojo.service.jupyter_driver import sign
from tests.service.conftest import LiveServer, running_server

CHECK = "assert 1 == 2, 'the solution is wrong'"
FORGED = json.dumps({"status": "Finished", "cells": [{"stdout": "", "stderr": "", "display": [], "error": []}] * 2})
# A forged record in the driver's format, under a key the forger made up.
FORGED_RECORD = sign(secrets.token_hex(16), secrets.token_bytes(32), FORGED).decode()
# Defines daemon(work, seconds, close_fds): ``work()`` every 10 ms for ``seconds`` in a process of
# its own session that outlives the cell (the kernel, the driver and the cells' end).
DAEMON = """
import os, time
def daemon(work, seconds, close_fds):
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            if close_fds:
                os.closerange(0, 1024)
            end = time.time() + seconds
            while time.time() < end:
                try:
                    work()
                except Exception:
                    pass
                time.sleep(0.01)
        os._exit(0)
    os.wait()
"""
# The reviewer's forger: keeps replacing the file the driver wrote its result to until 2026-12-06.
REWRITE_RESULT_FILE = f"""
FORGED = {FORGED!r}
def rewrite():
    os.makedirs("/tmp/dojo-jupyter", exist_ok=True)
    with open("/tmp/dojo-jupyter/.f", "w") as f:
        f.write(FORGED)
    os.replace("/tmp/dojo-jupyter/.f", "/tmp/dojo-jupyter/result.json")
daemon(rewrite, 30, close_fds=True)
print("solution defined")
"""
# Writes a forged result, once, before the driver writes its own: to that file, to every stream
# the kernel gave the cell, and to the driver's stdout through /proc.
WRITE_FIRST = f"""
import os
os.makedirs("/tmp/dojo-jupyter", exist_ok=True)
open("/tmp/dojo-jupyter/result.json", "w").write({FORGED!r})
for path in ("/dev/stdout", "/dev/stderr", "/proc/self/fd/1", f"/proc/{{os.getppid()}}/fd/1"):
    try:
        with open(path, "w") as f:
            f.write({FORGED_RECORD!r})
    except OSError:
        pass
os.write(1, {FORGED_RECORD!r}.encode())
print("solution defined")
"""
# Goes for the driver itself: its descriptors (the channel among them) and its memory (the key),
# from the cell (what it reached, printed) and from a daemon that keeps writing forged records to
# every descriptor it reaches, its own inherited ones too, through and after the driver's write.
REACH_THE_DRIVER = f"""
driver = os.getppid()
def reach():
    reached = []
    for name in [f"fd/{{n}}" for n in range(64)] + ["environ", "mem", "maps"]:
        try:
            os.close(os.open(f"/proc/{{driver}}/{{name}}", os.O_RDONLY))
            reached.append(name)
        except OSError:
            pass
    return reached
def forge():
    for path in ["/proc/self/fd/1", "/proc/self/fd/2"] + [f"/proc/{{driver}}/fd/{{n}}" for n in range(64)]:
        try:
            with open(path, "w") as f: f.write({FORGED_RECORD!r})
        except OSError: pass
daemon(forge, 30, close_fds=False)
print("reached", reach())
"""


@pytest.fixture(scope="module")
def kernel_server() -> Iterator[LiveServer]:
    try:
        EnvironmentStore().get(FUSION_ENVIRONMENT)
    except EnvironmentNotFound:
        pytest.skip(f"SandboxFusion's environment is not built here (make fusion-env): no {FUSION_ENVIRONMENT!r}")
    with running_server(ServiceSettings(pool_size=2, fusion_environment=FUSION_ENVIRONMENT)) as srv:
        yield srv


def run_jupyter(url: str, cells: list[str], **extra: object) -> dict:
    r = httpx.post(f"{url}/run_jupyter", json={"cells": cells, **extra}, timeout=120)
    assert r.status_code == 200, r.text
    return r.json()


def test_cells_run_in_order_in_one_kernel(kernel_server: LiveServer) -> None:
    cells = ["x = 41", "x + 1", "print(x)", "import sys\nsys.stderr.write('to stderr\\n')", "raise ValueError('bad')",
             "print('after the error', x)"]  # fmt: skip
    out = run_jupyter(kernel_server.url, cells)
    assert out["status"] == "Success", out
    first, value, printed, stderr, raised, after = out["cells"]
    assert first == {"stdout": "", "stderr": "", "display": [], "error": []}
    assert value["display"] == [{"text/plain": "42"}]
    assert printed["stdout"] == "41\n" and stderr["stderr"] == "to stderr\n"
    assert [(e["ename"], e["evalue"]) for e in raised["error"]] == [("ValueError", "bad")]
    assert after["stdout"] == "after the error 41\n"


def test_files_in_and_out(kernel_server: LiveServer) -> None:
    cells = ["text = open('in.txt').read()", "open('out.txt', 'w').write(text.upper())"]
    files = {"in.txt": base64.b64encode(b"notebook").decode()}
    out = run_jupyter(kernel_server.url, cells, files=files, fetch_files=["out.txt"])
    assert out["status"] == "Success", out
    assert out["files"] == {"out.txt": base64.b64encode(b"NOTEBOOK").decode()}


def test_a_cell_past_its_time_fails_the_request(kernel_server: LiveServer) -> None:
    out = run_jupyter(kernel_server.url, ["print('first')", "import time\ntime.sleep(60)"], cell_timeout=1)
    assert out["status"] == "Failed" and out["message"] == "TimeLimitExceeded" and out["cells"] == [], out
    assert out["driver"]["status"] == "Finished"


def test_the_whole_request_past_its_time_fails_with_the_drivers_result(kernel_server: LiveServer) -> None:
    out = run_jupyter(kernel_server.url, ["while True: pass"], total_timeout=1)
    assert out["status"] == "Failed" and out["driver"]["status"] == "TimeLimitExceeded", out


def test_without_a_python_environment_run_jupyter_is_a_clear_400(live: LiveServer) -> None:
    r = httpx.post(f"{live.url}/run_jupyter", json={"cells": ["1"]}, timeout=60)
    assert r.status_code == 400 and "make fusion-env" in r.json()["error"], r.text


def assert_the_check_failed(out: dict[str, Any], printed: str = "solution defined") -> None:
    """The honest outcome: every cell ran, the solution's output (``printed`` among what it wrote)
    and the check's error as the kernel sent them; nothing a cell wrote in the driver's stdout
    (where its result travels). ``printed`` without its newline: the kernel forwards what a cell
    writes to fd 1 itself on a thread of its own, which may land between ``print``'s text and its
    newline (once in a clean clone's suite: ``solution defined<the forged record>``), or inside it
    (``reached<the forged record> []``, another clean clone's): the forger's daemon writes its record
    on that fd, which is the cell's own output, so it is taken out before ``printed`` is looked for."""
    assert out["status"] == "Success", out
    solution, check = out["cells"]
    assert printed in solution["stdout"].replace(FORGED_RECORD, "") and solution["error"] == [], out
    assert [e["ename"] for e in check["error"]] == ["AssertionError"], out
    assert out["driver"]["stdout"] == "", out


def test_a_daemon_that_rewrites_the_result_file_does_not_change_the_result(kernel_server: LiveServer) -> None:
    """The reviewer's attack: a double-forked setsid daemon kept replacing the driver's result file
    (until 2026-12-06 the result was fetched from /tmp/dojo-jupyter/result.json): every cell came back
    without error, 4/4."""
    out = run_jupyter(kernel_server.url, [DAEMON + REWRITE_RESULT_FILE, CHECK], total_timeout=20)
    assert_the_check_failed(out)


def test_a_daemon_that_rewrites_the_result_file_does_not_turn_a_timeout_into_success(
    kernel_server: LiveServer,
) -> None:
    out = run_jupyter(kernel_server.url, [DAEMON + REWRITE_RESULT_FILE, "import time\ntime.sleep(60)"],
                      cell_timeout=1, total_timeout=20)  # fmt: skip
    assert out["status"] == "Failed" and out["message"] == "TimeLimitExceeded" and out["cells"] == [], out


def test_a_result_written_before_the_drivers_is_not_taken(kernel_server: LiveServer) -> None:
    out = run_jupyter(kernel_server.url, [WRITE_FIRST, CHECK], total_timeout=20)
    assert_the_check_failed(out)


def test_a_cell_cannot_reach_the_drivers_channel_or_key(kernel_server: LiveServer) -> None:
    out = run_jupyter(kernel_server.url, [DAEMON + REACH_THE_DRIVER, CHECK], total_timeout=20)
    assert_the_check_failed(out, printed="reached []")


def recorded(stdout: str) -> ExecutionResult:
    return ExecutionResult(verdict=Verdict.ACCEPTED, exit_code=0, stdout=stdout)


def test_only_the_drivers_own_record_and_nothing_else_is_its_result() -> None:
    """The service takes the run's stdout as the driver's result only when it is one record signed
    with that run's key (made in this process, sent only on the driver's stdin) and nothing else."""
    program, _ = jupyter_service.to_program(jupyter_service.RunJupyterRequest(cells=["1"]), "env")
    job = json.loads(program.stdin)
    assert job["key"] not in json.dumps([program.env, program.args, program.source, [f.path for f in program.files]])
    own = sign(job["run"], bytes.fromhex(job["key"]), FORGED).decode()
    out = jupyter_service.to_response(recorded(own))
    assert out.status == "Success" and len(out.cells) == 2 and out.driver is not None and out.driver.stdout == ""
    other_key = sign(job["run"], secrets.token_bytes(32), FORGED).decode()
    other_run = sign(secrets.token_hex(16), bytes.fromhex(job["key"]), FORGED).decode()
    for stdout in ("", FORGED, other_key, other_run, own[:-1], own + "\n", own + own, FORGED_RECORD + own,
                   own.replace('"Finished"', '"Finishef"')):  # fmt: skip
        out = jupyter_service.to_response(recorded(stdout))
        assert out.status == "Failed" and out.message == jupyter_service.NO_RESULT and out.cells == [], stdout
        assert out.driver is not None and out.driver.stdout == ""


@pytest.mark.xfail(strict=True, reason="not defended (docs/threat-model.md): the cells share one kernel, the "
                   "candidate's process, which reports every later cell's outcome as it likes")  # fmt: skip
def test_a_cell_cannot_change_how_a_later_cell_runs_in_its_kernel(kernel_server: LiveServer) -> None:
    blank_later_cells = "get_ipython().input_transformers_cleanup.append(lambda lines: ['pass\\n'])\n"
    out = run_jupyter(kernel_server.url, [blank_later_cells + "print('solution defined')", CHECK])
    assert_the_check_failed(out)
