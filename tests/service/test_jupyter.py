"""SandboxFusion's ``/run_jupyter``: cells in one Jupyter kernel inside the sandbox. The kernel needs
jupyter_client and ipykernel, which SandboxFusion's environment has (``make fusion-env``; CI builds it
before the suite): these tests skip where it is not built."""

from __future__ import annotations

import base64
from collections.abc import Iterator

import httpx
import pytest

from dojo.sandbox.environment import EnvironmentNotFound, EnvironmentStore
from dojo.service import ServiceSettings
from dojo.service.fusion import FUSION_ENVIRONMENT
from tests.service.conftest import LiveServer, running_server


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
