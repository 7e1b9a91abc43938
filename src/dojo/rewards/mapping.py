"""From test results to a number: reward modes and shaping hooks.

Modes: ``default`` is the mapping from dojo's seeds: 1.0 when every test passes, 0.5 when some do,
0.0 when none do or the code does not compile. ``fraction`` is passed/total, ``binary`` is 1 or 0.
A user function ``(passed, total) -> float`` may replace them. Shaping hooks add named components
(for example a format bonus or a length penalty) to the correctness component.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, Protocol

from dojo.rewards.outcome import CaseOutcome
from dojo.tasks.model import Task

RewardMode = Literal["default", "fraction", "binary"]
RewardFunction = Callable[[int, int], float]


def correctness(passed: int, total: int, mode: RewardMode | RewardFunction = "default") -> float:
    """The correctness component for ``passed`` of ``total`` tests."""
    if callable(mode):
        return float(mode(passed, total))
    if total <= 0 or passed <= 0:
        return 0.0
    if mode == "fraction":
        return passed / total
    if mode == "binary":
        return 1.0 if passed == total else 0.0
    if mode == "default":
        return 1.0 if passed == total else 0.5
    raise ValueError(f"unknown reward mode {mode!r}; use default, fraction, binary or a function")


NOTHING = ("no_answer", "compile_error")  # verdicts of replies that earn nothing, shaping included: it may cost
SHOWN_ONLY = "suspicious:shown_examples_only"  # the flag of a grade whose only passes are the prompt's examples


def shown_examples_only(task: Task, cases: list[CaseOutcome]) -> bool:
    """Whether the tests that passed are all ones the prompt shows, where the task has hidden ones
    too (function, assert and stdio tasks, whose cases are its tests). Such passes earn nothing: the
    answers are in the prompt, and a table of them (``{"[0]": 6, "[1]": 5}.get(...)``, which no
    scan names) had earned 0.5 on every arith, identify and expressions task."""
    if task.form not in ("function", "assert", "stdio"):
        return False
    hidden = {i for i, t in enumerate(task.tests) if not t.visible}
    if not hidden or len(hidden) == len(task.tests):
        return False
    passed = {c.index for c in cases if c.passed and c.index >= 0}
    return bool(passed) and not passed & hidden


class Shaping(Protocol):
    """A shaping hook: a named component computed from the completion text and the correctness."""

    name: str

    def __call__(self, completion: str, correctness: float) -> float: ...


class LengthPenalty:
    """Subtracts up to ``penalty`` as the completion grows from ``soft_limit`` to ``hard_limit`` chars."""

    name = "length"

    def __init__(self, soft_limit: int = 2000, hard_limit: int = 8000, penalty: float = 0.2) -> None:
        if not 0 < soft_limit < hard_limit:
            raise ValueError("length shaping needs 0 < soft_limit < hard_limit")
        self.soft_limit, self.hard_limit, self.penalty = soft_limit, hard_limit, penalty

    def __call__(self, completion: str, correctness: float) -> float:
        over = (len(completion) - self.soft_limit) / (self.hard_limit - self.soft_limit)
        return -self.penalty * min(1.0, max(0.0, over))


class FormatBonus:
    """Adds ``bonus`` when the completion has the expected shape (a fenced code block, or an
    ``<answer>`` tag), whatever its correctness: a small push toward parsable outputs."""

    name = "format"

    def __init__(self, pattern: Literal["code_block", "answer_tag"] = "code_block", bonus: float = 0.1) -> None:
        self.pattern, self.bonus = pattern, bonus

    def __call__(self, completion: str, correctness: float) -> float:
        if self.pattern == "code_block":
            ok = "```" in completion
        else:
            ok = "<answer>" in completion and "</answer>" in completion
        return self.bonus if ok else 0.0
