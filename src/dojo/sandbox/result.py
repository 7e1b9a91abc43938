"""What a run produced, and how the raw facts from the zygote become a verdict."""

from __future__ import annotations

import signal as _signal
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from dojo.sandbox.errors import SandboxError
from dojo.sandbox.guest.wire import RunReply
from dojo.sandbox.program import Base64Bytes
from dojo.sandbox.verdict import LimitKind, Verdict


class StepResult(BaseModel):
    """One executed step (the compile step or the run step)."""

    model_config = ConfigDict(frozen=True)

    exit_code: int | None = None
    signal: int | None = None
    stdout: str = ""
    stderr: str = ""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    wall_time: float = 0.0
    cpu_time: float = 0.0
    peak_memory: int = 0
    limit: LimitKind | None = None
    cached: bool = Field(
        False,
        description="A compile step that did not run for this program: an identical earlier build's result, "
        "its times that build's (``AsyncSandbox.builds``).",
    )

    @property
    def signal_name(self) -> str | None:
        if self.signal is None:
            return None
        try:
            return _signal.Signals(self.signal).name
        except ValueError:
            return f"SIG{self.signal}"


class FetchedFile(BaseModel):
    """A file brought back from the work dir. In JSON, ``content`` is base64."""

    model_config = ConfigDict(frozen=True)

    path: str
    content: Base64Bytes | None = None
    truncated: bool = False
    error: str | None = None


class ExecutionResult(BaseModel):
    """The outcome of running a program. ``limit`` says which limit a limit verdict came from."""

    model_config = ConfigDict(frozen=True)

    verdict: Verdict
    exit_code: int | None = None
    signal: int | None = None
    stdout: str = ""
    stderr: str = ""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    wall_time: float = 0.0
    cpu_time: float = 0.0
    peak_memory: int = 0
    limit: LimitKind | None = None
    compile: StepResult | None = Field(None, description="The compile step, for compiled languages.")
    files: dict[str, FetchedFile] = Field(default_factory=dict)
    sandbox_error: str | None = Field(None, description="Why the sandbox failed (verdict SandboxError).")
    language: str = ""
    session_restarted: bool | None = Field(None, description="Sessions: the interpreter was (re)started for this exec.")
    session_ended: bool | None = Field(None, description="Sessions: the interpreter ended; its state is gone.")

    @property
    def ok(self) -> bool:
        return self.verdict is Verdict.ACCEPTED

    def raise_for_sandbox_error(self) -> ExecutionResult:
        if self.verdict is Verdict.SANDBOX_ERROR:
            raise SandboxError(self.sandbox_error or "sandbox error")
        return self

    @classmethod
    def from_sandbox_error(cls, reason: str, language: str = "") -> ExecutionResult:
        return cls(verdict=Verdict.SANDBOX_ERROR, sandbox_error=reason, language=language)


_LIMIT_VERDICT = {
    "wall": (Verdict.TIME_LIMIT_EXCEEDED, LimitKind.WALL_TIME),
    "cpu": (Verdict.TIME_LIMIT_EXCEEDED, LimitKind.CPU_TIME),
    "memory": (Verdict.MEMORY_LIMIT_EXCEEDED, LimitKind.MEMORY),
    "output": (Verdict.OUTPUT_LIMIT_EXCEEDED, LimitKind.OUTPUT),
    "file_size": (Verdict.RUNTIME_ERROR, LimitKind.FILE_SIZE),
}


def step_from_wire(raw: RunReply, blobs: list[bytes]) -> StepResult:
    reached = raw.get("limit")
    limit = _LIMIT_VERDICT[reached][1] if reached else None
    return StepResult(
        exit_code=raw["exit_code"],
        signal=raw["signal"],
        stdout=blobs[raw["stdout_blob"]].decode("utf-8", errors="replace"),
        stderr=blobs[raw["stderr_blob"]].decode("utf-8", errors="replace"),
        stdout_truncated=raw["stdout_truncated"],
        stderr_truncated=raw["stderr_truncated"],
        wall_time=raw["wall_s"],
        cpu_time=raw["cpu_s"],
        peak_memory=raw["peak_memory_bytes"],
        limit=limit,
    )


def verdict_of(raw: RunReply) -> Verdict:
    """Verdict of a finished run step from the zygote's raw facts."""
    reached = raw.get("limit")
    if reached:
        return _LIMIT_VERDICT[reached][0]
    if raw["exit_code"] == 0:
        return Verdict.ACCEPTED
    return Verdict.RUNTIME_ERROR


def result_from_wire(header: dict[str, Any], blobs: list[bytes], language: str, compiled: bool) -> ExecutionResult:
    """Build the ExecutionResult from a zygote response (see ``dojo.sandbox.guest.zygote``)."""
    if header.get("error"):
        return ExecutionResult.from_sandbox_error(f"zygote: {header['error']}", language)
    steps: list[RunReply] = header["steps"]
    for raw in steps:
        if raw.get("exec_error"):
            return ExecutionResult.from_sandbox_error(
                f"could not start the {raw.get('role', 'run')} step: {raw['exec_error']}", language
            )
    files: dict[str, FetchedFile] = {}
    for item in header.get("fetched", []):
        blob = item.get("blob")
        files[item["path"]] = FetchedFile(
            path=item["path"],
            content=blobs[blob] if blob is not None else None,
            truncated=bool(item.get("truncated")),
            error=item.get("error"),
        )
    compile_step: StepResult | None = None
    run_raw = steps[-1]
    if compiled:
        compile_step = step_from_wire(steps[0], blobs)
        if len(steps) == 1:  # the compile step failed, so nothing ran
            return ExecutionResult(
                verdict=Verdict.COMPILE_ERROR,
                **dict(compile_step),
                compile=compile_step,
                files=files,
                language=language,
            )
    run = step_from_wire(run_raw, blobs)
    return ExecutionResult(
        verdict=verdict_of(run_raw), **dict(run), compile=compile_step, files=files, language=language
    )
