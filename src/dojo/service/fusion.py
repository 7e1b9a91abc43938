"""SandboxFusion compatibility: ``POST /run_code`` request and response, mapped onto dojo's runtime.

Field names and status strings follow SandboxFusion, so verl's ``sandbox_fusion`` reward code and
the ``sandbox-fusion`` client work unchanged. dojo's own precision travels in extra fields
(``verdict``, ``limit``, ``peak_memory``) that those clients ignore. Python and pytest run in the
service's fusion environment (SandboxFusion's image's packages), as SandboxFusion runs them in its
image's Python.
"""

from __future__ import annotations

import base64
import binascii
import functools
import os
import subprocess
from enum import StrEnum
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator

from dojo.errors import InputError
from dojo.sandbox import (
    ExecutionResult,
    InputFile,
    LimitKind,
    Limits,
    Program,
    SandboxAPI,
    SandboxError,
    StepResult,
    Verdict,
)
from dojo.sandbox.errors import LanguageUnavailable
from dojo.sandbox.languages import LANGUAGES, default_python, resolve_toolchain
from dojo.sandbox.program import check_fetch_path, check_relative_path

# SandboxFusion language names -> dojo's (each Language lists its own). Languages SandboxFusion
# knows but dojo does not run are rejected with a 400 that names what is supported.
FUSION_LANGUAGES = {alias: lang.name for lang in LANGUAGES.values() for alias in lang.fusion}
DEFAULT_MEMORY_MB = 1024
# The languages SandboxFusion runs in its image's Python (and so in the service's fusion environment).
PYTHON_LANGUAGES = frozenset({"python", "pytest"})


# The Python environment /run_code runs Python in by default: SandboxFusion's image's packages
# (fusion_env/requirements.txt, resolved for the sandbox's Python into fusion_env/lock.txt), with
# the modules most programs import already imported in its warm slots. `make fusion-env` builds it.
FUSION_ENVIRONMENT = "sandboxfusion"
FUSION_LOCK = Path(__file__).with_name("fusion_env") / "lock.txt"
FUSION_PRELOAD = ("numpy", "pandas", "requests", "matplotlib.pyplot")
WARM_LIMITS = Limits(wall_time=120, cpu_time=120, memory=2 << 30)


@functools.cache
def system_site_packages() -> tuple[str, ...]:
    """The sandbox interpreter's own site-packages folders (Debian's ``dist-packages``). A run in the
    fusion environment does not see them: SandboxFusion's Python has its image's packages and no
    others (an old system pyOpenSSL beside the environment's newer cryptography breaks eventlet's
    import, and with it every pytest run that loads nameko's plugin)."""
    out = subprocess.run(
        [default_python(), "-S", "-E", "-s", "-c", "import site; print('\\n'.join(site.getsitepackages()))"],
        capture_output=True, text=True, timeout=30, check=True,
    )  # fmt: skip
    return tuple(p for p in out.stdout.split() if os.path.isdir(p))


def build_command(name: str = FUSION_ENVIRONMENT) -> str:
    """The command that builds SandboxFusion's environment under ``name``."""
    return f"dojo env build {name} --lock {FUSION_LOCK} --preload {','.join(FUSION_PRELOAD)}"


async def warm(sandbox: SandboxAPI, environment: str) -> None:
    """Start the environment's warm slots (their zygotes import its preload modules) with one empty
    run, so that the first request does not wait for them; a missing environment, or one whose
    modules do not import, fails here, before the service takes a request."""
    result = await sandbox.run(Program(language="python", source="", environment=environment), WARM_LIMITS)
    if result.verdict is not Verdict.ACCEPTED:
        raise SandboxError(
            f"the fusion environment {environment!r} cannot run an empty program ({result.verdict}): "
            f"{(result.sandbox_error or result.stderr)[-2000:]}"
        )
    try:
        resolve_toolchain(LANGUAGES["pytest"])
    except LanguageUnavailable:
        return
    # One pytest run, so that the plugins every pytest run loads (faker, eventlet, nameko, ...: ~1.6 s
    # of CPU) are read from disk here and not by the first request: a cold first read made
    # SandboxFusion's test_pytest_pass miss its 5 s limit (wall 5.02 s) right after other work.
    warm_test = Program(language="pytest", source="def test_warm():\n    pass\n", environment=environment,
                        hidden=list(system_site_packages()))  # fmt: skip
    await sandbox.run(warm_test, WARM_LIMITS)


class RunStatus(StrEnum):
    SUCCESS = "Success"
    FAILED = "Failed"
    SANDBOX_ERROR = "SandboxError"


class CommandRunStatus(StrEnum):
    FINISHED = "Finished"
    ERROR = "Error"
    TIME_LIMIT_EXCEEDED = "TimeLimitExceeded"


class FusionRequest(BaseModel):
    """What SandboxFusion's requests share: files in and out, and dojo's ``environment``. Unknown
    extra fields are ignored, as SandboxFusion does."""

    model_config = ConfigDict(extra="ignore")

    memory_limit_MB: int = Field(-1, ge=-1, le=65536, description="-1: the service default (1024 MB).")
    files: dict[str, str | None] = Field(default_factory=dict, description="Path -> base64 content.")
    fetch_files: list[str] = Field(default_factory=list)
    # dojo's extra: a Python environment built with 'dojo env build' (SandboxFusion has one fixed image)
    environment: str | None = Field(None, max_length=100)

    @field_validator("files")
    @classmethod
    def _files(cls, v: dict[str, str | None]) -> dict[str, str | None]:
        for path, content in v.items():
            check_relative_path(path)
            if content is not None:
                try:
                    base64.b64decode(content, validate=True)
                except (binascii.Error, ValueError) as e:
                    raise InputError(f"files[{path!r}] is not valid base64: {e}") from e
        return v

    @field_validator("fetch_files")
    @classmethod
    def _fetch(cls, v: list[str]) -> list[str]:
        return [check_fetch_path(p) for p in v]

    def input_files(self) -> list[InputFile]:
        return [InputFile(path=p, content=base64.b64decode(c or "")) for p, c in self.files.items()]

    def memory(self) -> int:
        """The memory limit in bytes (``-1``: the service default)."""
        return (self.memory_limit_MB if self.memory_limit_MB > 0 else DEFAULT_MEMORY_MB) << 20


class RunCodeRequest(FusionRequest):
    """SandboxFusion's ``/run_code`` request."""

    code: str = Field(description="The code to run.")
    language: str = Field("python", max_length=32, description="A SandboxFusion language name (dojo languages).")
    compile_timeout: float = Field(10, gt=0, le=600)
    run_timeout: float = Field(10, gt=0, le=600)
    stdin: str | None = None


class CommandRunResult(BaseModel):
    status: CommandRunStatus
    execution_time: float | None = None
    cpu_time: float | None = None
    return_code: int | None = None
    stdout: str | None = None
    stderr: str | None = None
    # dojo's extras
    verdict: Verdict | None = None
    limit: str | None = None
    peak_memory: int | None = None


class RunCodeResponse(BaseModel):
    status: RunStatus
    message: str
    compile_result: CommandRunResult | None = None
    run_result: CommandRunResult | None = None
    executor_pod_name: str | None = None
    files: dict[str, str] = Field(default_factory=dict)
    verdict: Verdict | None = None


def to_program(req: RunCodeRequest, environment: str | None = None) -> tuple[Program, Limits, Limits]:
    """A dojo Program and run/compile limits. Raises InputError for a language dojo cannot run.
    ``environment``: the Python environment of a Python or pytest run whose request names none
    (SandboxFusion runs both in its image's Python, with its packages: ``dojo serve
    --fusion-environment``)."""
    lang = FUSION_LANGUAGES.get(req.language)
    if lang is None:
        raise InputError(
            f"language {req.language!r} is not supported by dojo; supported: {', '.join(sorted(FUSION_LANGUAGES))}"
        )
    memory = req.memory()
    files = req.input_files()
    chosen = req.environment or (environment if lang in PYTHON_LANGUAGES else None)
    program = Program(
        language=lang, source=req.code, stdin=req.stdin or "", files=files, fetch=req.fetch_files,
        environment=chosen, hidden=list(system_site_packages()) if chosen and chosen == environment else [],
    )  # fmt: skip
    limits = Limits(wall_time=req.run_timeout, cpu_time=req.run_timeout, memory=max(memory, 4 << 20))
    compile_limits = Limits(
        wall_time=req.compile_timeout, cpu_time=req.compile_timeout, memory=max(memory, 1024 << 20), processes=64
    )
    return program, limits, compile_limits


RUN_STEP_FIELDS = sorted(StepResult.model_fields.keys() & ExecutionResult.model_fields.keys())  # (not ``cached``)


def run_step(result: ExecutionResult) -> StepResult:
    """A result's last step (the run step, or the compile step of a compile error)."""
    return StepResult(**{name: getattr(result, name) for name in RUN_STEP_FIELDS})


def command_result(step: StepResult, verdict: Verdict) -> CommandRunResult:
    """One step as SandboxFusion reports it."""
    if verdict is Verdict.TIME_LIMIT_EXCEEDED:
        status = CommandRunStatus.TIME_LIMIT_EXCEEDED
    else:
        status = CommandRunStatus.FINISHED
    return_code = step.exit_code if step.exit_code is not None else (-step.signal if step.signal else None)
    return CommandRunResult(
        status=status,
        execution_time=step.wall_time,
        cpu_time=step.cpu_time,
        return_code=return_code,
        stdout=step.stdout,
        stderr=step.stderr,
        verdict=verdict,
        limit=str(step.limit) if step.limit else None,
        peak_memory=step.peak_memory,
    )


def to_response(result: ExecutionResult) -> RunCodeResponse:
    if result.verdict is Verdict.SANDBOX_ERROR:
        return RunCodeResponse(
            status=RunStatus.SANDBOX_ERROR, message=result.sandbox_error or "sandbox error", verdict=result.verdict
        )
    compile_result = None
    compile_verdict = Verdict.ACCEPTED
    if result.compile is not None:
        if result.compile.limit in (LimitKind.WALL_TIME, LimitKind.CPU_TIME):
            compile_verdict = Verdict.TIME_LIMIT_EXCEEDED
        elif result.verdict is Verdict.COMPILE_ERROR:
            compile_verdict = Verdict.COMPILE_ERROR
        else:
            compile_verdict = Verdict.ACCEPTED
        compile_result = command_result(result.compile, compile_verdict)
    run_result = None
    # (no run when the compile step failed: a compile past its time limit had a run_result copied from it)
    if compile_verdict is Verdict.ACCEPTED:
        run_result = command_result(run_step(result), result.verdict)
    ok = result.verdict is Verdict.ACCEPTED
    files = {p: base64.b64encode(f.content).decode() for p, f in result.files.items() if f.content is not None}
    message = "" if ok else str(result.verdict)
    return RunCodeResponse(
        status=RunStatus.SUCCESS if ok else RunStatus.FAILED,
        message=message,
        compile_result=compile_result,
        run_result=run_result,
        files=files,
        verdict=result.verdict,
    )
