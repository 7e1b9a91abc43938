"""SandboxFusion's ``POST /run_jupyter``: notebook cells run one after another in a Jupyter kernel,
each cell's stdout, stderr, displays and error returned.

As in SandboxFusion, one sandboxed run per request: a driver (``jupyter_driver.py``, its source
sent as the run's program) starts a kernel of the run's Python environment, whose packages must
include ``jupyter_client`` and ``ipykernel`` (SandboxFusion's, ``make fusion-env``, do); the kernel
talks to the driver over the run's own loopback, and everything it starts ends with the run.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from dojo.errors import InputError
from dojo.sandbox import ExecutionResult, Limits, Program, Verdict
from dojo.service.fusion import (
    CommandRunResult,
    FusionRequest,
    RunStatus,
    command_result,
    run_step,
    system_site_packages,
)

DRIVER = Path(__file__).with_name("jupyter_driver.py").read_text()
RESULT = "/tmp/dojo-jupyter/result.json"  # where the driver writes the cells' outputs (fetched)
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


def to_program(req: RunJupyterRequest, environment: str | None) -> tuple[Program, Limits]:
    """The driver's run and its limits. ``environment``: the service's fusion environment, the
    kernel's unless the request names another; InputError when there is neither."""
    chosen = req.environment or environment
    if not chosen:
        raise InputError(
            "/run_jupyter needs a Python environment with jupyter_client and ipykernel: start dojo serve with "
            "--fusion-environment (SandboxFusion's packages: make fusion-env), or name one in 'environment'"
        )
    program = Program(
        language="python", source=DRIVER, stdin=json.dumps({"kernel": req.kernel, "cells": req.cells,
                                                            "cell_timeout": req.cell_timeout, "result": RESULT}),
        files=req.input_files(), fetch=[RESULT, *req.fetch_files], env=KERNEL_ENV, environment=chosen,
        hidden=list(system_site_packages()) if chosen == environment else [],
    )  # fmt: skip
    seconds = req.total_timeout + DRIVER_SLACK_S
    return program, Limits(wall_time=seconds, cpu_time=seconds, memory=max(req.memory(), 64 << 20))


def to_response(result: ExecutionResult) -> RunJupyterResponse:
    """SandboxFusion's answer: ``Success`` with every cell's output when the driver ran them all;
    ``Failed`` with the driver's own result otherwise (a cell or the whole past its time, a kernel
    that did not start); ``SandboxError`` when the sandbox failed."""
    if result.verdict is Verdict.SANDBOX_ERROR:
        return RunJupyterResponse(status=RunStatus.SANDBOX_ERROR, message=result.sandbox_error or "sandbox error")
    driver = command_result(run_step(result), result.verdict)
    written = result.files.get(RESULT)
    outcome = None
    if written is not None and written.content is not None:
        try:
            outcome = DriverResult.model_validate_json(written.content)
        except ValidationError:
            outcome = None  # a cell overwrote it: the driver's own result says what happened
    files = {p: base64.b64encode(f.content).decode() for p, f in result.files.items()
             if f.content is not None and p != RESULT}  # fmt: skip
    if outcome is None or outcome.status != "Finished" or result.verdict is not Verdict.ACCEPTED:
        why = outcome.status if outcome is not None and outcome.status != "Finished" else str(result.verdict)
        return RunJupyterResponse(status=RunStatus.FAILED, message=why, driver=driver, files=files)
    return RunJupyterResponse(status=RunStatus.SUCCESS, message="", driver=driver, cells=outcome.cells, files=files)
