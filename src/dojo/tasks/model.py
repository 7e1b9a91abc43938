"""The task model: what a model is asked, and everything a grader needs to check the answer.

A task has one *form*, which says how a candidate is graded:

- ``function``: call a named function with arguments; return values are compared in the grader;
- ``stdio``: a program reads stdin and writes stdout; output compared token by token (or by a checker);
- ``assert``: HumanEval-style ``check(candidate)`` code run after the candidate;
- ``answer``: one final answer extracted from text and compared (exact or numeric).

Tests are ``visible`` (may be shown in the prompt) or hidden (never shown, graded on).
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from dojo.sandbox import Limits

TaskForm = Literal["function", "stdio", "assert", "answer"]
FORMS: tuple[str, ...] = ("function", "stdio", "assert", "answer")
AnswerMatch = Literal["exact", "numeric", "reasoning_gym"]


class Message(BaseModel):
    """One chat message of a prompt."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    role: Literal["system", "user", "assistant"]
    content: str


class TestCase(BaseModel):
    """One check. Which fields matter depends on the task's form:

    - function: ``args``/``kwargs`` in, ``expected`` return value;
    - stdio: ``stdin`` in, ``expected`` stdout (a string);
    - assert: ``code``, Python defining ``check(candidate)``;
    - answer: ``expected`` answer (a string).
    """

    __test__ = False  # not a pytest class
    model_config = ConfigDict(frozen=True, extra="forbid")

    args: list[Any] = Field(default_factory=list)
    kwargs: dict[str, Any] = Field(default_factory=dict)
    stdin: str = ""
    expected: Any = None
    code: str | None = None
    visible: bool = False

    @field_validator("args", "kwargs", "expected")
    @classmethod
    def _json_values(cls, v: Any) -> Any:
        try:
            json.dumps(v)
        except (TypeError, ValueError) as e:
            raise ValueError(f"test values must be JSON data (numbers, strings, lists, dicts): {e}") from e
        return v


class TaskMetadata(BaseModel):
    """Where a task came from and how hard it is. ``difficulty`` runs from 0 (easiest) to 1."""

    model_config = ConfigDict(extra="allow")

    source: str = "user"
    difficulty: float | None = Field(None, ge=0.0, le=1.0)
    tags: list[str] = Field(default_factory=list)


class Task(BaseModel):
    """A verifiable task. Serialises to one JSON object (a JSONL line or a Parquet row)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(min_length=1, max_length=512)
    domain: str = Field("code", min_length=1, description="code, math, logic, data, ...")
    form: TaskForm
    prompt: str | list[Message]
    language: str = Field("python", description="Language of candidate code (function/assert forms: python).")
    entry_point: str | None = Field(None, description="Function name (function and assert forms).")
    tests: list[TestCase] = Field(default_factory=list)
    reference: str | None = Field(None, description="A solution known to pass: code, or the answer text.")
    limits: Limits | None = Field(None, description="Per-run limits; the grader's defaults when absent.")
    float_tolerance: float = Field(1e-6, ge=0.0, description="Relative/absolute tolerance for float comparison.")
    answer_match: AnswerMatch = Field("exact", description="answer form: exact, numeric, or the source's scorer.")
    checker: str | None = Field(None, description="stdio form: Python checker program (special judge).")
    environment: str | None = Field(
        None,
        max_length=100,
        pattern=r"^[a-z0-9][a-z0-9_.-]{0,63}(@[0-9a-f]{16})?$",
        description="The Python environment candidate code runs in ('dojo env build NAME'): NAME or NAME@VERSION.",
    )
    metadata: TaskMetadata = Field(default_factory=TaskMetadata)

    @model_validator(mode="after")
    def _form_fields(self) -> Task:
        if self.form in ("function", "assert") and not self.entry_point:
            raise ValueError(f"a {self.form} task needs entry_point (the function's name)")
        if self.form in ("function", "assert") and self.language != "python":
            raise ValueError(f"{self.form} tasks are graded in Python; language must be 'python'")
        if self.form != "answer" and not self.tests:
            raise ValueError(f"a {self.form} task needs at least one test")
        if self.form == "answer" and not self.tests and self.reference is None:
            raise ValueError("an answer task needs a test with the expected answer (or a reference)")
        if self.form == "assert" and any(not t.code for t in self.tests):
            raise ValueError("every test of an assert task needs code defining check(candidate)")
        if self.form == "stdio" and self.checker is None and any(not isinstance(t.expected, str) for t in self.tests):
            raise ValueError("every test of a stdio task needs expected stdout (a string), or the task a checker")
        return self

    @property
    def hidden_tests(self) -> list[TestCase]:
        return [t for t in self.tests if not t.visible]

    @property
    def visible_tests(self) -> list[TestCase]:
        return [t for t in self.tests if t.visible]

    @property
    def difficulty(self) -> float | None:
        return self.metadata.difficulty

    def prompt_text(self) -> str:
        """The prompt as one string (chat messages joined), for audits and text-only policies."""
        if isinstance(self.prompt, str):
            return self.prompt
        return "\n\n".join(m.content for m in self.prompt)

    def messages(self) -> list[dict[str, str]]:
        """The prompt as chat messages."""
        if isinstance(self.prompt, str):
            return [{"role": "user", "content": self.prompt}]
        return [m.model_dump() for m in self.prompt]
