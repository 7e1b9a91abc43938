"""Request and response bodies of the native API (/v1). Results are ``ExecutionResult``s."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, field_validator, model_validator

from dojo.sandbox import ExecutionResult, Limits, Program, get_language
from dojo.sandbox.program import check_args, check_text

MAX_BATCH = 1024


class RunRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    program: Program
    limits: Limits = Field(default_factory=Limits)
    compile_limits: Limits | None = None
    isolation: Literal["fast", "strict"] = "fast"


class FunctionCall(BaseModel):
    """Call a function the (Python) program defines. Arguments are dojo wire values: plain JSON,
    plus tagged objects for what JSON cannot say (``{"$t": [...]}`` a tuple, ``{"$s": [...]}`` a
    set, ``{"$d": [[k, v], ...]}`` a dict with non-string keys; see ``dojo.tasks.values``)."""

    model_config = ConfigDict(extra="forbid")

    function: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=128)
    args: list[JsonValue] = Field(default_factory=list)
    kwargs: dict[str, JsonValue] = Field(default_factory=dict)


class BatchCase(BaseModel):
    """One test input: stdin (and optionally the expected stdout) and arguments, or a function call
    (and optionally its expected return value, compared outside the sandbox)."""

    model_config = ConfigDict(extra="forbid")

    stdin: str = ""
    expected_stdout: str | None = None
    args: list[str] = Field(default_factory=list)
    call: FunctionCall | None = None
    expected_return: JsonValue = Field(
        None,
        description="With 'call': the value the call must return (a dojo wire value), compared as data: "
        "exact types (a tuple is not a list, True is not 1), floats within 'tolerance'.",
    )
    tolerance: float = Field(1e-6, ge=0.0, description="With 'call': relative/absolute float tolerance.")
    limits: Limits | None = Field(None, description="Limits of this case; the batch's limits otherwise.")

    @field_validator("stdin")
    @classmethod
    def _stdin(cls, v: str) -> str:  # (a case's stdin goes into a copy of the program, unvalidated)
        return check_text(v, "stdin", raw_bytes=True)

    @field_validator("args")
    @classmethod
    def _args(cls, v: list[str]) -> list[str]:
        return check_args(v)


class BatchRequest(BaseModel):
    """Either one ``program`` against ``cases``, or several ``programs`` (each with its own stdin)."""

    model_config = ConfigDict(extra="forbid")

    program: Program | None = None
    cases: list[BatchCase] = Field(default_factory=list, max_length=MAX_BATCH)
    programs: list[Program] = Field(default_factory=list, max_length=MAX_BATCH)
    limits: Limits = Field(default_factory=Limits)
    compile_limits: Limits | None = None
    stop_on_first_failure: bool = Field(
        False, description="Stop at the first case that is not Accepted; later cases are reported as skipped."
    )

    @model_validator(mode="after")
    def _one_shape(self) -> BatchRequest:
        if (self.program is None) == (not self.programs):
            raise ValueError("give either 'program' with 'cases', or 'programs' (not both, not neither)")
        if self.program is not None and not self.cases:
            raise ValueError("'program' needs at least one entry in 'cases'")
        calls = any(c.call is not None for c in self.cases)
        if calls and self.program is not None and get_language(self.program.language).name != "python":
            raise ValueError("function-call cases ('call') need a python program")
        return self


class BatchItem(BaseModel):
    index: int
    skipped: bool = False
    result: ExecutionResult | None = None
    return_value: JsonValue = Field(None, description="With 'call': what the function returned (a dojo wire value).")


BatchStop = Literal["first_failure", "answer_size", "deadline", "client_gone"]


class BatchResponse(BaseModel):
    results: list[BatchItem]
    accepted: int
    total: int
    stopped: BatchStop | None = Field(
        None,
        description="Why the items marked skipped were not run: the first failure (stop_on_first_failure), the "
        "answer's size (the service's --max-answer-bytes), the batch's time (--max-batch-seconds), the client gone.",
    )


class ErrorBody(BaseModel):
    error: str
    detail: object | None = None
    request_id: str | None = None
