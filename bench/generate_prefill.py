"""One GRPO step's generation (12 prompts x 8 samples, as the embedded default's) with the shared
prefill of ``HFPolicy`` and with every row computed, alternately, in one process: CPU time per
batch, and whether the two sample the same tokens.

    python bench/generate_prefill.py RUN_DIR/warm-start [--batches 8] [--threads 1]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from pathlib import Path
from typing import Any


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", type=Path, help="A model directory (a run's warm-start/).")
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--threads", type=int, default=1, help="Torch threads (1: steady CPU time when busy).")
    args = parser.parse_args()

    import torch

    from dojo.agent.hf_policy import HFPolicy, _Request
    from dojo.agent.policy import SamplingParams
    from dojo.train.config import TrainConfig
    from dojo.train.data import split_tasks
    from dojo.train.run import load_policy

    torch.set_num_threads(args.threads)
    model, tokenizer = load_policy(args.model)
    train, _ = split_tasks(TrainConfig().tasks, 0)
    policy = HFPolicy(model, tokenizer, name="bench", prompt_format="text")
    params = SamplingParams(temperature=1.0, max_tokens=24, seed=0)
    shared = HFPolicy._shared_prefill
    every_row: Any = lambda self, *a: {}  # noqa: E731
    seconds: dict[str, list[float]] = {"shared": [], "every row": []}
    same = 0
    for k in range(args.batches):
        tasks = random.Random(k).sample(train, 12)
        requests = [_Request(policy.prompt_ids(t.messages()), params, 1, None) for t in tasks for _ in range(8)]  # type: ignore[arg-type]
        out = {}
        order = ["shared", "every row"] if k % 2 == 0 else ["every row", "shared"]
        for name in order:
            HFPolicy._shared_prefill = shared if name == "shared" else every_row  # type: ignore[method-assign]
            start = time.process_time()
            out[name] = [c.token_ids for cs in policy._generate_batch(requests, params) for c in cs]
            seconds[name].append(time.process_time() - start)
        same += out["shared"] == out["every row"]
    HFPolicy._shared_prefill = shared  # type: ignore[method-assign]
    for name, values in seconds.items():
        print(f"{name:>9}: {statistics.median(values) * 1000:.0f} ms CPU a batch (median of {len(values)})")
    print(f"same tokens in {same} of {args.batches} batches")


if __name__ == "__main__":
    main()
