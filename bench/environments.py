"""Environment benchmark: `import pandas, numpy` and a small groupby, in a dojo environment (the
zygote has the modules imported; each run forks with them) against a fresh interpreter per run
with the same packages on its path (what SandboxFusion and most RL scripts do).

    .venv/bin/python bench/environments.py [--repeats 5] [--runs 60] [--root DIR]

Builds (or reuses) the environment `bench-data` (pandas, numpy) with `dojo env build`'s code, from
pip's configured index, under --root (default: a temporary directory), and names the same files
`bench-warm` with a warm-up (one DataFrame groupby run by each zygote, so pandas' lazy set-up is
done there), and runs the first again with a spare (`AsyncSandbox(spare=True)`: each run finds its
process forked while the slot was idle, instead of forking it after the request arrives). Prints p50/p99 latency
at concurrency 1 and throughput at concurrency 2 for each way, medians over --repeats interleaved
rounds, and the idle memory (PSS) of an environment's warm slot.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from dojo.sandbox import AsyncSandbox
from dojo.sandbox.environment import EnvironmentStore
from dojo.sandbox.languages import default_python
from dojo.sandbox.loadtest import closed_loop, naive_runner, sandbox_runner

SOURCE = """import numpy as np
import pandas as pd

df = pd.DataFrame({"key": np.arange(1000) % 7, "value": np.arange(1000)})
print(int(df.groupby("key")["value"].sum().loc[3]))
"""
EXPECTED = str(sum(v for v in range(1000) if v % 7 == 3))


def pss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1]) / 1024
    return 0.0


def slot_pss_mib(holder: int) -> float:
    """A slot's PSS: its `unshare` holder and the zygote under it."""
    children = Path(f"/proc/{holder}/task/{holder}/children").read_text().split()
    return pss_mib(holder) + sum(pss_mib(int(c)) for c in children)


async def bench(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    store = EnvironmentStore(root)
    t0 = time.perf_counter()
    environment = store.build("bench-data", requirements=["pandas", "numpy"])
    build_s = time.perf_counter() - t0
    store.build("bench-warm", lock=list(environment.lock), warmup=SOURCE.replace("print(", "str("))
    python = default_python()
    async with (
        AsyncSandbox(pool_size=args.pool_size, environments=store) as sandbox,
        AsyncSandbox(pool_size=args.pool_size, environments=store, spare=True) as with_spare,
    ):
        t0 = time.perf_counter()
        warm = sandbox_runner(sandbox, SOURCE, EXPECTED, environment="bench-data")
        assert await warm(), "the environment's run did not print the expected sum"
        pool_start_s = time.perf_counter() - t0
        warmed = sandbox_runner(sandbox, SOURCE, EXPECTED, environment="bench-warm")
        assert await warmed(), "the warmed environment's run did not print the expected sum"
        spared = sandbox_runner(with_spare, SOURCE, EXPECTED, environment="bench-data")
        assert await spared(), "the environment's run (spare) did not print the expected sum"
        ways = {
            "dojo environment": warm,
            "dojo environment, spare": spared,
            "dojo environment, warm-up": warmed,
            "fresh interpreter": naive_runner(python, SOURCE, EXPECTED, python_path=str(environment.site_packages)),
        }
        rounds: dict[str, dict[str, list[float]]] = {w: {} for w in ways}
        wrong = dict.fromkeys(ways, 0)
        for _ in range(args.repeats):
            for way, runner in ways.items():
                c1 = await closed_loop(runner, 1, args.runs)
                c2 = await closed_loop(runner, 2, args.runs)
                rounds[way].setdefault("p50_ms", []).append(c1.p50 * 1000)
                rounds[way].setdefault("p99_ms", []).append(c1.percentile(0.99) * 1000)
                rounds[way].setdefault("runs_per_s_c2", []).append(c2.throughput)
                wrong[way] += c1.wrong + c2.wrong
        env_pool = next(iter(sandbox._extra_pools.values()))
        slot_pss = [slot_pss_mib(s.pid) for s in env_pool.slots() if s.pid is not None]
    return {
        "build_s": build_s,
        "pool_start_s": pool_start_s,
        "lock": environment.lock,
        "slot_pss_mib": statistics.median(slot_pss) if slot_pss else 0.0,
        "ways": {w: {**{k: statistics.median(v) for k, v in f.items()}, "wrong": wrong[w]} for w, f in rounds.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5, help="rounds; each figure is the median")
    parser.add_argument("--runs", type=int, default=60, help="runs per measurement")
    parser.add_argument("--pool-size", type=int, default=2, help="warm slots of the environment")
    parser.add_argument("--root", type=Path, default=None, help="environment store (default: a temporary one)")
    args = parser.parse_args()
    if args.repeats < 1 or args.runs < 5:
        parser.error("--repeats must be >= 1 and --runs >= 5")
    with tempfile.TemporaryDirectory(prefix="dojo-bench-env-") as tmp:
        results = asyncio.run(bench(args, args.root or Path(tmp)))
    print(f"environment: {', '.join(results['lock'])}")
    print(f"build {results['build_s']:.1f} s; first run (starts the environment's slots) "
          f"{results['pool_start_s']:.2f} s")  # fmt: skip
    print("| way | p50 ms (c=1) | p99 ms (c=1) | runs/s (c=2) | wrong |")
    print("|---|---|---|---|---|")
    for way, f in results["ways"].items():
        print(f"| {way} | {f['p50_ms']:.1f} | {f['p99_ms']:.1f} | {f['runs_per_s_c2']:.1f} | {f['wrong']} |")
    naive = results["ways"]["fresh interpreter"]
    for way in ("dojo environment", "dojo environment, spare", "dojo environment, warm-up"):
        print(f"p50 ratio fresh / {way}: {naive['p50_ms'] / results['ways'][way]['p50_ms']:.1f}x")
    print(f"idle PSS of an environment slot: {results['slot_pss_mib']:.1f} MiB")


if __name__ == "__main__":
    main()
