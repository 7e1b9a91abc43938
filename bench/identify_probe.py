"""How well a model tells the ``identify`` functions apart, whatever it would sample.

    python bench/identify_probe.py runs/dojo-train/warm-start runs/dojo-train/final

For each of the 200 held-out prompts of the embedded default, every one of the sixteen functions is
scored by the model's log-likelihood as the completion. Printed per model: how often the right
function is the most likely one (overall and per difficulty level), and the probability the model
gives the right one among the sixteen. A warm start that hard-codes answers samples few functions at
all, so its sampled reward says little about this; the probe shows what GRPO has to keep.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import torch

from dojo.tasks.families import family_candidates
from dojo.tasks.model import Task
from dojo.train.config import TrainConfig
from dojo.train.data import split_tasks
from dojo.train.run import load_policy


@torch.no_grad()
def completion_logprobs(model: Any, tokenizer: Any, prompt: str, completions: list[str]) -> torch.Tensor:
    """log p(completion + end of text | prompt) for each completion."""
    prompt_len = len(tokenizer(prompt, add_special_tokens=False).input_ids)
    texts = [prompt + c + tokenizer.eos_token for c in completions]
    # right padding: each row's completion starts right after the prompt's tokens
    enc = tokenizer(texts, return_tensors="pt", padding=True, padding_side="right", add_special_tokens=False)
    logits = model(**enc).logits[:, :-1].log_softmax(-1)
    targets = enc.input_ids[:, 1:]
    token_lp = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    mask = enc.attention_mask[:, 1:].clone()
    mask[:, : prompt_len - 1] = 0  # only the completion's tokens
    total: torch.Tensor = (token_lp * mask).sum(-1)
    return total


def probe(model: Any, tokenizer: Any, tasks: list[Task]) -> dict[str, Any]:
    right_top: list[bool] = []
    right_prob: list[float] = []
    by_level: dict[float, list[bool]] = defaultdict(list)
    for task in tasks:
        candidates = family_candidates(task)
        if not candidates or task.reference not in candidates:
            raise SystemExit(f"task {task.id!r} is not an identify task; the probe needs family:identify")
        lp = completion_logprobs(model, tokenizer, task.prompt_text(), candidates)
        right = candidates.index(task.reference)
        top = int(lp.argmax()) == right
        right_top.append(top)
        right_prob.append(math.exp(float(lp[right] - lp.logsumexp(0))))
        by_level[round(task.difficulty if task.difficulty is not None else 0.5, 2)].append(top)
    return {
        "right_is_most_likely": sum(right_top) / len(right_top),
        "p_right_among_functions": sum(right_prob) / len(right_prob),
        "by_level": {level: sum(v) / len(v) for level, v in sorted(by_level.items())},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("models", nargs="+", type=Path, help="model directories (a run's warm-start/, final/, ...)")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    args = parser.parse_args(argv)
    missing = [str(m) for m in args.models if not (m / "config.json").is_file()]
    if missing:
        parser.error(f"not a model directory (no config.json): {', '.join(missing)}")
    torch.set_num_threads(args.threads)
    config = TrainConfig()
    _, held_out = split_tasks(config.tasks, config.seed)  # the same held-out tasks for every seed
    print(f"{'model':<48} {'right most likely':>17} {'p(right)':>9}  by level (most likely)")
    for path in args.models:
        model, tokenizer = load_policy(path)
        r = probe(model.eval(), tokenizer, held_out)
        levels = "  ".join(f"{k:.2f}: {v:.2f}" for k, v in r["by_level"].items())
        print(f"{path!s:<48} {r['right_is_most_likely']:>17.3f} {r['p_right_among_functions']:>9.3f}  {levels}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
