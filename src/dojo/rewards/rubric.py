"""A judge's rubric: what it checks, how each check is answered, and how the answers become a score.

A ``Rubric`` is a list of ``Criterion``: either a graded criterion with ordered ``levels`` (worst
first; the judge answers a level's index) or a yes/no check (no levels; the judge answers ``met``).
Each criterion has a weight; the score is the weighted mean of the criteria's scores (a level's
score is its index over the last index; a met check 1, an unmet one 0), so it lies in [0, 1].

``Rubric.verdict_schema()`` is the JSON schema the judge must answer in (sent as the request's
``response_format``), and ``Rubric.parse`` reads a reply strictly: a reply that is not exactly that
object (a missing or extra criterion, a level out of range, text around the JSON) is refused with a
``ValueError``; the judge is asked again, and a judge that never answers in form gives no reward.
``PAIRWISE_SCHEMA`` / ``parse_pairwise`` are the same for a comparison of two answers.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from dojo.tasks.values import untrusted_json

Winner = Literal["A", "B", "tie"]


class Criterion(BaseModel):
    """One thing the judge checks."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(description="A short identifier, the key of this criterion in the judge's reply.")
    description: str = Field(min_length=1, description="What the judge checks, in words it is shown.")
    weight: float = Field(1.0, gt=0, description="Weight of this criterion in the rubric's score.")
    levels: list[str] | None = Field(
        None,
        description="Ordered levels, worst first, each described in words (at least two); None: a yes/no check.",
    )

    @field_validator("name")
    @classmethod
    def _identifier(cls, v: str) -> str:
        if not v.isidentifier():
            raise ValueError(f"a criterion's name must be an identifier (letters, digits, _), not {v!r}")
        return v

    @field_validator("levels")
    @classmethod
    def _levels(cls, v: list[str] | None) -> list[str] | None:
        if v is not None and len(v) < 2:
            raise ValueError("a graded criterion needs at least two levels (or none: a yes/no check)")
        return v

    def score(self, answer: dict[str, Any]) -> float:
        """This criterion's score in [0, 1] from its (already validated) answer."""
        if self.levels is None:
            return 1.0 if answer["met"] else 0.0
        return float(answer["level"]) / (len(self.levels) - 1)

    def answer_schema(self) -> dict[str, Any]:
        value: dict[str, Any]
        if self.levels is None:
            value = {"met": {"type": "boolean"}}
        else:
            value = {"level": {"type": "integer", "minimum": 0, "maximum": len(self.levels) - 1}}
        return {
            "type": "object",
            "properties": {"reason": {"type": "string"}, **value},
            "required": ["reason", *value],
            "additionalProperties": False,
        }

    def describe(self) -> str:
        if self.levels is None:
            return f"- {self.name} (yes/no, weight {self.weight:g}): {self.description}"
        levels = "; ".join(f"{i} = {text}" for i, text in enumerate(self.levels))
        return f"- {self.name} (level 0-{len(self.levels) - 1}, weight {self.weight:g}): {self.description} [{levels}]"


class Rubric(BaseModel):
    """What a judge scores and how: criteria with weights, and the score a pass needs."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field("rubric", description="The rubric's name (the schema's name in the request).")
    task: str = Field("", description="What the judged text is meant to do, told to the judge before the criteria.")
    criteria: list[Criterion] = Field(min_length=1, description="The criteria, in the order the judge is shown.")
    pass_threshold: float = Field(0.5, ge=0, le=1, description="A score at or above it is a pass.")

    @model_validator(mode="after")
    def _unique(self) -> Rubric:
        names = [c.name for c in self.criteria]
        if len(set(names)) != len(names):
            raise ValueError(f"criterion names must be unique: {names}")
        return self

    def verdict_schema(self) -> dict[str, Any]:
        """The JSON schema of a verdict: one answer object per criterion, nothing else."""
        return {
            "type": "object",
            "properties": {c.name: c.answer_schema() for c in self.criteria},
            "required": [c.name for c in self.criteria],
            "additionalProperties": False,
        }

    def describe(self) -> str:
        return "\n".join(c.describe() for c in self.criteria)

    def parse(self, text: str) -> dict[str, dict[str, Any]]:
        """A reply as a verdict, strictly (``ValueError`` saying what is wrong otherwise)."""
        data = _json_object(text)
        if set(data) != {c.name for c in self.criteria}:
            raise ValueError(
                f"the verdict's keys {sorted(data)} are not the criteria {[c.name for c in self.criteria]}"
            )
        for c in self.criteria:
            answer = data[c.name]
            if not isinstance(answer, dict) or not isinstance(answer.get("reason"), str):
                raise ValueError(f"criterion {c.name}: an object with a reason is needed")
            if c.levels is None:
                if set(answer) != {"reason", "met"} or not isinstance(answer["met"], bool):
                    raise ValueError(f"criterion {c.name}: answer met (true or false) and a reason")
            else:
                level = answer.get("level")
                if set(answer) != {"reason", "level"} or type(level) is not int or not 0 <= level < len(c.levels):
                    raise ValueError(f"criterion {c.name}: answer a level 0-{len(c.levels) - 1} and a reason")
        return data

    def score(self, verdict: dict[str, dict[str, Any]]) -> float:
        """The weighted mean of the criteria's scores."""
        total = sum(c.weight for c in self.criteria)
        return sum(c.weight * c.score(verdict[c.name]) for c in self.criteria) / total

    def met(self, verdict: dict[str, dict[str, Any]]) -> int:
        """Criteria answered at their best (a met check, the top level)."""
        return sum(c.score(verdict[c.name]) >= 1.0 for c in self.criteria)


PAIRWISE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"reason": {"type": "string"}, "winner": {"type": "string", "enum": ["A", "B", "tie"]}},
    "required": ["reason", "winner"],
    "additionalProperties": False,
}


def parse_pairwise(text: str) -> Winner:
    """A comparison's winner (``A``, ``B`` or ``tie``), strictly."""
    data = _json_object(text)
    if set(data) != {"reason", "winner"} or data["winner"] not in ("A", "B", "tie"):
        raise ValueError("the verdict must be {reason, winner} with winner A, B or tie")
    winner: Winner = data["winner"]
    return winner


def _json_object(text: str) -> dict[str, Any]:
    try:
        data = untrusted_json(text)
    except (ValueError, TypeError) as e:
        raise ValueError(f"the reply is not JSON: {e}") from None
    if not isinstance(data, dict):
        raise ValueError("the reply is not a JSON object")
    return data
