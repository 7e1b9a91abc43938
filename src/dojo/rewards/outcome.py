"""What grading a completion produces: a ``Reward`` with its components and flags, and the
running ``RewardStats`` a trainer shows (verdicts, hacks, infrastructure failures)."""

from __future__ import annotations

import collections
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

GradeVerdict = Literal[
    "pass",  # every test passed
    "partial",  # some passed
    "fail",  # none passed (or wrong answer)
    "compile_error",  # the candidate did not compile / load
    "no_answer",  # nothing to grade (no code, no final answer)
    "hack",  # a reward-hacking pattern was found: scores 0
    "infrastructure_error",  # the sandbox failed: no reward (None), retry or drop the sample
]


class CaseOutcome(BaseModel):
    """One test's result, for feedback to an agent and for audits."""

    model_config = ConfigDict(frozen=True)

    index: int
    passed: bool
    detail: str = ""


class Reward(BaseModel):
    """The reward of one completion. ``value`` is None when the infrastructure failed: such a
    sample must be retried or dropped, never trained on as a 0."""

    model_config = ConfigDict(frozen=True)

    value: float | None
    verdict: GradeVerdict
    passed: int = 0
    total: int = 0
    components: dict[str, float] = Field(default_factory=dict)
    flags: list[str] = Field(default_factory=list)
    cases: list[CaseOutcome] = Field(default_factory=list)
    error: str | None = None

    @property
    def fraction(self) -> float:
        return self.passed / self.total if self.total else 0.0

    @property
    def is_hack(self) -> bool:
        return self.verdict == "hack"

    def feedback(self, max_cases: int = 5) -> str:
        """A short text for a multi-turn agent: what failed and why (never the hidden expectations)."""
        lines = [f"{self.verdict}: {self.passed}/{self.total} tests passed"]
        if self.error:
            lines.append(self.error[-1500:])
        for c in [c for c in self.cases if not c.passed][:max_cases]:
            if c.detail:
                lines.append(f"test {c.index}: {c.detail}")
        return "\n".join(lines)


class RewardStats:
    """Counts over many rewards: verdicts, hack kinds, infrastructure failures, mean reward."""

    def __init__(self) -> None:
        self.verdicts: collections.Counter[str] = collections.Counter()
        self.hacks: collections.Counter[str] = collections.Counter()
        self.scored = 0
        self.total_value = 0.0

    def add(self, reward: Reward) -> None:
        self.verdicts[reward.verdict] += 1
        for flag in reward.flags:
            if flag.startswith("hack:"):
                self.hacks[flag.removeprefix("hack:")] += 1
        if reward.value is not None:
            self.scored += 1
            self.total_value += reward.value

    @property
    def mean(self) -> float | None:
        return self.total_value / self.scored if self.scored else None

    @property
    def hack_rate(self) -> float:
        n = sum(self.verdicts.values())
        return self.verdicts["hack"] / n if n else 0.0

    def as_dict(self) -> dict[str, object]:
        return {
            "verdicts": dict(self.verdicts),
            "hacks": dict(self.hacks),
            "scored": self.scored,
            "infrastructure_errors": self.verdicts["infrastructure_error"],
            "mean_reward": self.mean,
            "hack_rate": self.hack_rate,
        }
