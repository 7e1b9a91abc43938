"""Held-out evaluation (``dojo.train.evaluate``) with the tiny model and dojo's graders."""

from __future__ import annotations

from pathlib import Path

from dojo.integrations.trl import DojoRollout
from dojo.train.evaluate import evaluate
from tests.integrations.conftest import arith_tasks


def test_a_prompt_past_the_context_is_counted_apart_from_infrastructure_errors(tiny_model_dir: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    short = arith_tasks(["x + 1"])[0]
    long = short.model_copy(update={"id": "long", "prompt": short.prompt + "\n# " + "x" * 1200})  # past 1,024
    rollout = DojoRollout([short, long])
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    try:
        result = evaluate(model, tokenizer, [short, long], rollout, samples=2, temperature=1.0, max_tokens=8)
    finally:
        rollout.close()
    assert result.prompts_too_long == 3  # two sampled and one greedy episode of the long task
    assert result.infrastructure_errors == 0  # (the sandbox and the model did not fail)
    assert result.tasks == 2 and 0.0 <= result.mean_reward <= 1.0
