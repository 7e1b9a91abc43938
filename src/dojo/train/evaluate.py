"""Held-out evaluation of a local model: sample completions, grade them in the sandbox.

``mean_reward`` is the reward GRPO maximises (completions sampled at the training temperature,
``samples`` per task); ``pass_rate`` is the share of those that pass every test; ``greedy_pass``
is the pass rate of one greedy completion per task.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from pydantic import BaseModel

from dojo.integrations.trl_rewards import DojoReward
from dojo.tasks.model import Task


class EvalResult(BaseModel):
    tasks: int
    samples: int
    mean_reward: float
    pass_rate: float
    greedy_pass: float
    infrastructure_errors: int = 0


def generate(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[str],
    *,
    samples: int,
    temperature: float,
    max_tokens: int,
    batch_size: int = 32,
) -> list[list[str]]:
    """``samples`` completions per prompt (greedy when ``temperature`` is 0), sampling from the full
    distribution (no top-k/top-p), as TRL's GRPO does."""
    model.eval()
    out: list[list[str]] = []
    side = tokenizer.padding_side
    tokenizer.padding_side = "left"
    try:
        with torch.no_grad():
            for i in range(0, len(prompts), batch_size):
                chunk = list(prompts[i : i + batch_size])
                enc = tokenizer(chunk, return_tensors="pt", padding=True, add_special_tokens=False)
                kwargs: dict[str, Any] = {"do_sample": temperature > 0, "max_new_tokens": max_tokens}
                if temperature > 0:
                    kwargs.update(
                        temperature=temperature, top_k=len(tokenizer), top_p=1.0, num_return_sequences=samples
                    )
                ids = model.generate(
                    **enc, pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id, **kwargs
                )
                texts = tokenizer.batch_decode(ids[:, enc.input_ids.shape[1] :], skip_special_tokens=True)
                per = samples if temperature > 0 else 1
                out.extend(texts[j * per : (j + 1) * per] for j in range(len(chunk)))
    finally:
        tokenizer.padding_side = side
    return out


def evaluate(
    model: Any,
    tokenizer: Any,
    tasks: Sequence[Task],
    reward: DojoReward,
    *,
    samples: int,
    temperature: float,
    max_tokens: int,
) -> EvalResult:
    prompts = [t.prompt_text() for t in tasks]
    sampled = generate(model, tokenizer, prompts, samples=samples, temperature=temperature, max_tokens=max_tokens)
    greedy = generate(model, tokenizer, prompts, samples=1, temperature=0.0, max_tokens=max_tokens)
    flat_tasks = [t for t, group in zip(tasks, sampled, strict=True) for _ in group]
    flat = [c for group in sampled for c in group]
    graded = reward.grade(flat_tasks + list(tasks), flat + [g[0] for g in greedy])
    sampled_r, greedy_r = graded[: len(flat)], graded[len(flat) :]
    values = [r.value for r in sampled_r if r.value is not None]
    failures = sum(1 for r in graded if r.value is None)
    return EvalResult(
        tasks=len(tasks),
        samples=samples,
        mean_reward=sum(values) / len(values) if values else 0.0,
        pass_rate=sum(r.verdict == "pass" for r in sampled_r) / max(1, len(sampled_r)),
        greedy_pass=sum(r.verdict == "pass" for r in greedy_r) / max(1, len(greedy_r)),
        infrastructure_errors=failures,
    )
