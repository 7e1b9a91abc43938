"""``GradingConfig``: how completions become rewards, one model for every entry point.

``Grader``, the TRL reward functions, environment and ``rollout_func``, the verl bridge,
``dojo train`` (its ``reward`` and ``sandbox`` sections) and ``dojo rollout`` all take one, and all
share its defaults: the seeds' mapping (1.0 when every test passes, 0.5 when some do, 0.0 when
none do), the grader's own limits, the static scan on, no shaping.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from dojo.rewards.mapping import RewardFunction, RewardMode, Shaping
from dojo.sandbox import Limits


class GradingConfig(BaseModel):
    """How a completion is graded and turned into a reward."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    mode: Any = Field(
        "default",
        description="default (1 / 0.5 / 0; all or nothing where the source's own reward multiplies its parts: "
        "tau2), fraction (passed/total), binary (all or nothing), or a function (passed, total) -> float.",
    )
    limits: Limits | None = Field(None, description="Limits of each grading run; the task's, else the grader's own.")
    scan: bool = Field(
        True,
        description="Static reward-hack scan of Python candidates, and the diff check of the lines a repo task's "
        "edits add (a confirmed hack scores 0).",
    )
    shaping: tuple[Any, ...] = Field((), description="Shaping hooks that add named components to the reward.")
    call_rules: Literal["task", "bfcl", "strict"] = Field(
        "task",
        description="How a tools task's calls are checked (dojo.rewards.calls): bfcl (BFCL's checker, verdict for "
        "verdict, its quirks included), strict (the same less BFCL's quirks: each refusal names its rule), or task "
        "(the task's test says; bfcl: sources say bfcl).",
    )

    @field_validator("mode")
    @classmethod
    def _mode(cls, v: Any) -> RewardMode | RewardFunction:
        if callable(v) or v in ("default", "fraction", "binary"):
            return v  # type: ignore[no-any-return]
        raise ValueError(f"unknown reward mode {v!r}; use default, fraction, binary or a function (passed, total)")

    @field_validator("shaping", mode="before")
    @classmethod
    def _shaping(cls, v: Any) -> tuple[Shaping, ...]:
        hooks = tuple(v) if isinstance(v, Sequence) else (v,)
        for hook in hooks:
            if not (callable(hook) and isinstance(getattr(hook, "name", None), str)):
                raise ValueError(f"a shaping hook needs a `name` and __call__(completion, correctness): {hook!r}")
        return hooks


DEFAULT_GRADING = GradingConfig()
