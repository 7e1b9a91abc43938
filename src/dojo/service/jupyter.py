"""SandboxFusion's ``POST /run_jupyter``: notebook cells run one after another in a Jupyter kernel,
each cell's stdout, stderr, displays and error returned.

As in SandboxFusion, one sandboxed run per request: a driver (``jupyter_driver.py``, its source
sent as the run's program) starts a kernel of the run's Python environment, whose packages must
include ``jupyter_client`` and ``ipykernel`` (SandboxFusion's, ``make fusion-env``, do); the kernel
talks to the driver over the run's own loopback, and everything it starts ends with the run.

The kernel's processes are the candidate's, of the driver's uid, and may outlive their cells: the
driver's result therefore travels on the run's stdout, which only the driver holds, signed with a
key made for that run (``run_key``: an HMAC of a random run id under this process's secret, sent
on the driver's stdin, which no other process of the run can read). Anything else there (a
record of another key, bytes before or after it) is no result, and the request ``Failed``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import secrets
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from dojo.errors import InputError
from dojo.sandbox import ExecutionResult, Limits, Program, Verdict, bundle
from dojo.sandbox.guest import trusted
from dojo.service.fusion import (
    CommandRunResult,
    FusionRequest,
    RunStatus,
    command_result,
    run_step,
    system_site_packages,
)

# (shipped with what it does first, before the cells run: ``dojo.sandbox.guest.trusted``)
DRIVER = bundle.program_source(Path(__file__).with_name("jupyter_driver.py"), (trusted,))
# This process's own: every run's key derives from it (``run_key``); it never leaves the process.
SECRET = secrets.token_bytes(32)
RECORD = re.compile(r"([0-9a-f]{32}) ([0-9a-f]{64}) ([\x20-\x7e]*)")  # the driver's record: RUN MAC PAYLOAD
RESULT_MAX_BYTES = 16 << 20  # the record's size (the run's stdout cap): the cells' outputs together
NO_RESULT = "the driver reported no result of its own"
# Where the kernel keeps its connection file, IPython and matplotlib their state: the run's /tmp
# (its home is the work dir, whose files the request may fetch).
KERNEL_ENV = {
    "JUPYTER_RUNTIME_DIR": "/tmp/dojo-jupyter/runtime",
    "JUPYTER_DATA_DIR": "/tmp/dojo-jupyter/data",
    "JUPYTER_CONFIG_DIR": "/tmp/dojo-jupyter/config",
    "JUPYTER_PLATFORM_DIRS": "1",
    "IPYTHONDIR": "/tmp/dojo-jupyter/ipython",
    "MPLCONFIGDIR": "/tmp/dojo-jupyter/matplotlib",
}
DRIVER_SLACK_S = 10  # the driver's own start and the kernel's, beyond the cells' total (SandboxFusion's)


class RunJupyterRequest(FusionRequest):
    """SandboxFusion's ``/run_jupyter`` request (``environment``: the kernel's, default the service's
    fusion environment)."""

    cells: list[str] = Field(min_length=1, max_length=1000, description="The cells' code, run in order.")
    cell_timeout: float = Field(0, ge=0, le=600, description="Seconds one cell may take; 0: no limit of its own.")
    total_timeout: float = Field(45, gt=0, le=600, description="Seconds all the cells may take.")
    kernel: Literal["python3"] = "python3"


class CellRunResult(BaseModel):
    stdout: str = ""
    stderr: str = ""
    display: list[dict[str, Any]] = Field(default_factory=list)
    error: list[dict[str, Any]] = Field(default_factory=list)


class RunJupyterResponse(BaseModel):
    status: RunStatus
    message: str
    driver: CommandRunResult | None = None
    cells: list[CellRunResult] = Field(default_factory=list)
    executor_pod_name: str | None = None
    files: dict[str, str] = Field(default_factory=dict)


class DriverResult(BaseModel):
    """What the driver wrote."""

    status: Literal["Finished", "TimeLimitExceeded", "Error"]
    cells: list[CellRunResult]


def run_key(run: str) -> bytes:
    """The key of the run ``run`` (its id): only this process can make it."""
    return hmac.new(SECRET, run.encode(), hashlib.sha256).digest()


def driver_result(stdout: str) -> DriverResult | None:
    """The driver's result if the run's stdout is one record signed with its run's key and nothing
    else; None otherwise (no record, a forged one, one with bytes before or after)."""
    match = RECORD.fullmatch(stdout)
    if match is None:
        return None
    run, mac, payload = match.groups()
    expected = hmac.new(run_key(run), payload.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(mac, expected):
        return None
    try:
        return DriverResult.model_validate_json(payload)
    except ValidationError:
        return None


def to_program(req: RunJupyterRequest, environment: str | None) -> tuple[Program, Limits]:
    """The driver's run and its limits. ``environment``: the service's fusion environment, the
    kernel's unless the request names another; InputError when there is neither."""
    chosen = req.environment or environment
    if not chosen:
        raise InputError(
            "/run_jupyter needs a Python environment with jupyter_client and ipykernel: start dojo serve with "
            "--fusion-environment (SandboxFusion's packages: make fusion-env), or name one in 'environment'"
        )
    run = secrets.token_hex(16)
    stdin = {"kernel": req.kernel, "cells": req.cells, "cell_timeout": req.cell_timeout, "run": run,
             "key": run_key(run).hex()}  # fmt: skip
    program = Program(
        language="python", source=DRIVER, stdin=json.dumps(stdin), files=req.input_files(), fetch=req.fetch_files,
        env=KERNEL_ENV, environment=chosen, hidden=list(system_site_packages()) if chosen == environment else [],
    )  # fmt: skip
    seconds = req.total_timeout + DRIVER_SLACK_S
    limits = Limits(wall_time=seconds, cpu_time=seconds, memory=max(req.memory(), 64 << 20), output=RESULT_MAX_BYTES)
    return program, limits


def to_response(result: ExecutionResult) -> RunJupyterResponse:
    """SandboxFusion's answer: ``Success`` with every cell's output when the driver ran them all and
    said so in its signed record; ``Failed`` otherwise (a cell or the whole past its time, a kernel
    that did not start, a driver killed, no record of its own); ``SandboxError`` when the sandbox
    failed. The driver's stdout is its record, never shown."""
    if result.verdict is Verdict.SANDBOX_ERROR:
        return RunJupyterResponse(status=RunStatus.SANDBOX_ERROR, message=result.sandbox_error or "sandbox error")
    driver = command_result(run_step(result).model_copy(update={"stdout": ""}), result.verdict)
    outcome = driver_result(result.stdout)
    files = {p: base64.b64encode(f.content).decode() for p, f in result.files.items() if f.content is not None}
    if outcome is None or outcome.status != "Finished" or result.verdict is not Verdict.ACCEPTED:
        why: str
        if outcome is not None and outcome.status != "Finished":
            why = outcome.status
        else:
            why = str(result.verdict) if result.verdict is not Verdict.ACCEPTED else NO_RESULT
        return RunJupyterResponse(status=RunStatus.FAILED, message=why, driver=driver, files=files)
    return RunJupyterResponse(status=RunStatus.SUCCESS, message="", driver=driver, cells=outcome.cells, files=files)
