"""The dashboard's first load of a large run, and what a new shard costs it (issue #38's target: a run
of 100,000 episodes loads in <= 2 s).

    .venv/bin/python bench/dashboard.py [--episodes 100000] [--shard 500] [--repeats 3]

Writes a trajectory store of ``--episodes`` rows (``--shard`` per shard, groups of 8) with messages
and turns of a realistic size (~3 KB of JSON an episode, never read by the page's figures), then,
per repeat, in a fresh process state: the page's first load (``RunView.refresh`` of every shard,
then the overview and the curves through the app, as the page asks for them), and a refresh after
one more shard. Prints the medians.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import tempfile
import time
import uuid
from pathlib import Path

import httpx

from dojo.dashboard import Dashboard, RunLocation, create_dashboard_app
from dojo.rollout.store import TrajectoryStore

GROUP = 8


def rows(n: int, start: float, rng: random.Random) -> list[dict[str, object]]:
    """``n`` episodes in groups of GROUP, with conversations of a realistic size."""
    out: list[dict[str, object]] = []

    def text(n: int) -> str:  # as incompressible as a model's output is to Parquet's codec
        return rng.randbytes(n // 2).hex()

    def turn() -> dict[str, object]:
        call = {"id": "c", "name": "run_code", "arguments": {"code": "print(1)"}}
        return {
            "index": 0,
            "completion": {"text": text(600)},
            "tool_results": [{"call": call, "observation": text(400)}],
        }

    for g in range(0, n, GROUP):
        group, task = uuid.uuid4().hex[:12], f"task-{rng.randrange(500)}"
        difficulty = rng.choice([0.2, 0.4, 0.6, 0.8])
        for i in range(min(GROUP, n - g)):
            passed = rng.random() < 1 - difficulty
            wall = rng.uniform(1, 30)
            out.append({
                "run_id": "bench", "episode_id": uuid.uuid4().hex, "group_id": group, "task_id": task,
                "sample_index": i, "attempt": 0, "status": "answered", "reward": float(passed),
                "verdict": "pass" if passed else "fail", "passed": int(passed), "total": 1, "components": "{}",
                "flags": [], "cases": "[]", "num_turns": 2, "tool_calls": 1, "prompt": "[]",
                "messages": json.dumps([{"role": "user", "content": text(800)}, {"role": "assistant", "content": ""}]),
                "final": "def f(x):\n    return x\n", "token_ids": None, "logprobs": None, "prompt_token_ids": None,
                "turns": json.dumps([turn(), turn()]), "turn_rewards": None, "prompt_tokens": 300,
                "completion_tokens": rng.randrange(50, 400), "wall_seconds": wall, "policy_seconds": wall * 0.6,
                "tool_seconds": wall * 0.3, "grade_seconds": wall * 0.1, "started_at": int((start + g * 0.01) * 1000),
                "task_source": "bench", "difficulty": difficulty, "error": None,
            })  # fmt: skip
    return out


def write_store(root: Path, episodes: int, shard: int) -> TrajectoryStore:
    store = TrajectoryStore(str(root))
    rng = random.Random(0)
    start = time.time() - 3600
    for offset in range(0, episodes, shard):
        batch = rows(min(shard, episodes - offset), start + offset * 0.01, rng)
        store.write(batch)
    return store


async def first_load(root: Path) -> tuple[float, float, int]:
    """Seconds to the page's first figures (refresh, overview, curves); then to take one new shard."""
    board = Dashboard([RunLocation.parse(str(root))], rules=[])  # (synthetic times: no alert is meant)
    transport = httpx.ASGITransport(app=create_dashboard_app(board))
    async with httpx.AsyncClient(transport=transport, base_url="http://d") as client:
        start = time.perf_counter()
        overview = (await client.get("/api/overview")).json()
        (await client.get("/api/runs/0/curves")).raise_for_status()
        loaded = time.perf_counter() - start
        write_store(root, GROUP * 8, GROUP * 8)  # one more shard
        start = time.perf_counter()
        await board.refreshed(max_age=0.0)
        (await client.get("/api/runs/0/curves")).raise_for_status()
        again = time.perf_counter() - start
    return loaded, again, int(overview["runs"][0]["episodes"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=100_000)
    parser.add_argument("--shard", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if args.episodes < GROUP or args.shard < GROUP or args.repeats < 1:
        parser.error(f"--episodes and --shard must be at least {GROUP}, --repeats at least 1")
    with tempfile.TemporaryDirectory(prefix="dojo-bench-dashboard-") as tmp:
        root = Path(tmp) / "store"
        start = time.perf_counter()
        write_store(root, args.episodes, args.shard)
        size = sum(p.stat().st_size for p in root.iterdir()) / 2**20
        print(f"wrote {args.episodes} episodes in {len(list(root.iterdir()))} shards ({size:.0f} MiB) "
              f"in {time.perf_counter() - start:.1f} s")  # fmt: skip
        loads, agains = [], []
        for _ in range(args.repeats):
            loaded, again, seen = asyncio.run(first_load(root))
            loads.append(loaded)
            agains.append(again)
        print(f"first load (overview + curves) of {seen} episodes: median {statistics.median(loads):.2f} s "
              f"(min {min(loads):.2f}, max {max(loads):.2f}; target <= 2 s)")  # fmt: skip
        print(f"one more shard, refreshed and redrawn: median {statistics.median(agains) * 1e3:.0f} ms")


if __name__ == "__main__":
    main()
