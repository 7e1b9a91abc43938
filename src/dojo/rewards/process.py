"""Process rewards: a reward for each turn of a multi-turn episode, beside the outcome's.

Sparse tasks (a model needs many revisions before any test passes) give an outcome reward of 0 to
almost every episode. Per-turn signals say which turns helped:

- **progress**: the change in the share of visible tests passed since the previous turn (a turn
  that fixes 2 of 4 more earns +0.5 x ``progress_weight``; one that breaks them loses as much);
- **repeating a failing action**: a tool call (name and arguments) or a reply identical to an
  earlier one that failed costs ``repeat_penalty``;
- **a malformed tool call** (not JSON, no name, arguments not an object) costs ``malformed_penalty``;
- **a process reward model** (``ProcessRewardModel``: a served model, ``ServedPRM``, or a local
  Hugging Face classifier, ``HFClassifierPRM``) scores each step in [0, 1], weighted by ``prm_weight``.

``turn_rewards(steps, config)`` turns ``StepSignal``s (built from an episode's turns by
``dojo.agent.turn_rewards``) into one reward per turn. They are stored beside the outcome
(``turn_rewards`` in the trajectory store) and handed to the trainers (``dojo.integrations``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from dojo.rewards.judge_client import JudgeClient, JudgeEndpoint

STEP_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"score": {"type": "number", "minimum": 0, "maximum": 1}},
    "required": ["score"],
    "additionalProperties": False,
}


class ProcessRewardConfig(BaseModel):
    """Weights of the per-turn signals."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    progress_weight: float = Field(1.0, description="Times the change in the share of visible tests passed.")
    repeat_penalty: float = Field(0.2, ge=0, description="Cost of repeating an action that failed before.")
    malformed_penalty: float = Field(0.2, ge=0, description="Cost of a malformed tool call.")
    prm_weight: float = Field(0.0, ge=0, description="Weight of a process reward model's step score.")


@dataclass(frozen=True)
class StepSignal:
    """What one turn did, as the per-turn rewards read it."""

    text: str
    passed: int | None = None  # visible tests passed after this turn (None: they did not run)
    total: int | None = None
    actions: tuple[str, ...] = ()  # the turn's actions (tool calls, or the reply checked), as keys
    failed: bool = False  # the turn's actions failed (tests failing, a tool error)
    malformed: int = 0  # malformed tool calls


def turn_rewards(
    steps: Sequence[StepSignal], config: ProcessRewardConfig, prm_scores: Sequence[float] | None = None
) -> list[dict[str, float]]:
    """Each turn's reward parts (``progress``, ``repeat``, ``malformed``, ``prm``) and ``total``."""
    out = []
    share = 0.0
    failed_before: set[str] = set()
    for i, step in enumerate(steps):
        parts: dict[str, float] = {}
        if step.passed is not None and step.total:
            now = step.passed / step.total
            parts["progress"] = config.progress_weight * (now - share)
            share = now
        repeats = sum(a in failed_before for a in step.actions)
        if repeats:
            parts["repeat"] = -config.repeat_penalty * repeats
        if step.malformed:
            parts["malformed"] = -config.malformed_penalty * step.malformed
        if prm_scores is not None and config.prm_weight:
            parts["prm"] = config.prm_weight * float(prm_scores[i])
        if step.failed:
            failed_before.update(step.actions)
        parts["total"] = sum(parts.values())
        out.append(parts)
    return out


@runtime_checkable
class ProcessRewardModel(Protocol):
    """Scores each step of a solution in [0, 1]: ``steps[k]`` is judged with ``steps[:k]`` before it."""

    async def score_steps(self, question: str, steps: Sequence[str]) -> list[float]: ...


class ServedPRM:
    """A process reward model behind an OpenAI-compatible endpoint, asked once per step for
    ``{"score": 0..1}`` (JSON schema as ``response_format``)."""

    PROMPT = (
        "Rate the last step of this partial solution: 1 if it is correct and makes progress, 0 if it is "
        'wrong or useless. Reply with JSON {"score": number between 0 and 1}.'
    )

    def __init__(self, endpoint: JudgeEndpoint, client: JudgeClient | None = None) -> None:
        self.client = client or JudgeClient(endpoint)

    async def aclose(self) -> None:
        await self.client.aclose()

    async def score_steps(self, question: str, steps: Sequence[str]) -> list[float]:
        import json

        async def one(k: int) -> float:
            shown = "\n\n".join(f"Step {i + 1}:\n{s}" for i, s in enumerate(steps[: k + 1]))
            messages = [
                {"role": "system", "content": self.PROMPT},
                {"role": "user", "content": f"Question:\n{question}\n\n{shown}"},
            ]
            reply = json.loads(await self.client.ask(messages, STEP_SCHEMA, "step_score"))
            return min(1.0, max(0.0, float(reply["score"])))

        return list(await asyncio.gather(*(one(k) for k in range(len(steps)))))


class HFClassifierPRM:
    """A local Hugging Face sequence classifier as a process reward model: the probability of its
    last label (``good``) for the question and the steps so far. Runs in a worker thread."""

    def __init__(self, model_dir: str | Path, *, max_length: int = 1024) -> None:
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
        self.model = AutoModelForSequenceClassification.from_pretrained(str(model_dir)).eval()
        if self.model.config.pad_token_id is None:
            self.model.config.pad_token_id = self.tokenizer.pad_token_id or self.tokenizer.eos_token_id
        self.max_length = max_length
        # a text past max_length loses its start, never the step being rated at its end: cut from the
        # right, a long first step had left every later step out of what the model read (each scored
        # as the first did, whatever it said)
        self.tokenizer.truncation_side = "left"

    def _score(self, question: str, steps: Sequence[str]) -> list[float]:
        import torch

        texts = [question + "\n\n" + "\n\n".join(steps[: k + 1]) for k in range(len(steps))]
        out = []
        with torch.no_grad():
            for text in texts:  # one at a time: no padding side to get wrong
                ids = self.tokenizer(text, return_tensors="pt", truncation=True, max_length=self.max_length)
                logits = self.model(**ids).logits[0]
                out.append(float(torch.softmax(logits, dim=-1)[-1]))
        return out

    async def score_steps(self, question: str, steps: Sequence[str]) -> list[float]:
        return await asyncio.to_thread(self._score, question, list(steps))
