"""The embedded default of ``dojo train`` over several seeds: held-out reward before and after
GRPO, wall time and peak memory per seed.

    python bench/train_seeds.py                 # seeds 0-4, one after another
    python bench/train_seeds.py --seeds 0 1 --set grpo.steps=100

Each seed runs ``dojo train`` in its own process (peak memory is that process tree's maximum
resident set, from ``getrusage``). Targets (issue #6): ≤ 10 min and ≤ 4 GB per run on 2 cores, and
a held-out rise of ≥ 0.3 in at least 4 of 5 seeds.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def run_seed(seed: int, root: Path, extra: list[str]) -> dict[str, float]:
    out = root / f"seed{seed}"
    cmd = [sys.executable, "-m", "dojo.cli", "train", "--out", str(out), "--seed", str(seed), "--json"]
    for item in extra:
        cmd += ["--set", item]
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    wall = time.monotonic() - start
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if proc.returncode != 0:
        raise SystemExit(f"seed {seed} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    result = json.loads(proc.stdout[proc.stdout.index("{") :])
    return {
        "seed": seed,
        "before": result["before"]["mean_reward"],
        "after": result["after"]["mean_reward"],
        "greedy_before": result["before"]["greedy_pass"],
        "greedy_after": result["after"]["greedy_pass"],
        "minutes": wall / 60,
        # ru_maxrss of children is the largest child so far; a later, smaller child cannot lower it
        "peak_gib": max(peak_kib, before) / (1 << 20),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--set", dest="overrides", action="append", default=[], help="FIELD=VALUE, as dojo train --set")
    parser.add_argument("--keep", type=Path, help="Keep the run directories here (default: a temporary directory).")
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="dojo-train-seeds-"))
    root.mkdir(parents=True, exist_ok=True)
    rows = []
    print(f"{'seed':>4} {'before':>7} {'after':>7} {'change':>7} {'greedy b→a':>12} {'minutes':>8} {'peak GiB':>9}")
    for seed in args.seeds:
        r = run_seed(seed, root, args.overrides)
        rows.append(r)
        print(f"{seed:>4} {r['before']:>7.3f} {r['after']:>7.3f} {r['after'] - r['before']:>+7.3f} "
              f"{r['greedy_before']:>5.2f}→{r['greedy_after']:<5.2f} {r['minutes']:>8.1f} {r['peak_gib']:>9.2f}",
              flush=True)  # fmt: skip
    rises = [r["after"] - r["before"] for r in rows]
    print(
        f"median change {statistics.median(rises):+.3f}; seeds rising by >= 0.3: {sum(d >= 0.3 for d in rises)} of "
        f"{len(rows)}; median {statistics.median(r['minutes'] for r in rows):.1f} min; "
        f"peak {max(r['peak_gib'] for r in rows):.2f} GiB"
    )


if __name__ == "__main__":
    main()
