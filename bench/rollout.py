"""Rollout benchmark: the same multi-turn workload scheduled (a) synchronously in batches, as in
the seeds' example, and (b) by dojo's RolloutScheduler.

    .venv/bin/python bench/rollout.py [--repeats 3] [--tasks 64] [--json out.json]

The policy is simulated; everything else is real. Each policy request holds one of ``--capacity``
slots (the accelerator's batch) for a generation time drawn from a long-tailed log-normal
(median ``--gen-median`` s, sigma ``--gen-sigma``), scaled per task by a fixed factor (some tasks
make longer answers: log-normal, sigma 0.5). Its reply is the task's reference expression with a
per-task probability (0.2-0.8; +0.3 after feedback), else a wrong one. Code is checked on the
visible tests after each turn and graded on all tests at the end, in dojo's sandbox.

(a) baseline: tasks in batches of capacity/group-size; per turn, generate for every open episode
    and wait for the slowest, then check every reply and wait for the slowest; the next batch starts
    when the whole batch is graded.
(b) dojo: ``RolloutScheduler`` with policy_concurrency = capacity, cost-aware ordering (costs
    learned in a warm-up pass over the same tasks), groups handed on as they finish.

Prints episodes/s, the fraction of wall time the policy had no request at all (idle), its mean
occupancy (in-flight / capacity), and batch latency (p50/p99: time between consecutive batches
of capacity/group-size groups being ready), median over --repeats, and the ratio b/a.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import statistics
import time
from typing import Any

from dojo.agent.episode import EpisodeConfig
from dojo.agent.policy import Completion, SamplingParams
from dojo.agent.tools import Toolbox
from dojo.rewards import Grader
from dojo.rollout import CostModel, RolloutConfig, RolloutScheduler
from dojo.sandbox import AsyncSandbox
from dojo.tasks import Task
from dojo.tasks.sources import load_source


class SimulatedPolicy:
    """A policy server with ``capacity`` slots and long-tailed generation times."""

    def __init__(self, tasks: list[Task], capacity: int, median: float, sigma: float, seed: int) -> None:
        self.capacity = asyncio.Semaphore(capacity)
        self.size = capacity
        self.median, self.sigma = median, sigma
        self.rng = random.Random(seed)
        task_rng = random.Random(1000)  # the workload: the same for every round
        self.scale = {t.prompt_text(): task_rng.lognormvariate(0.0, 0.5) for t in tasks}
        self.skill = {t.prompt_text(): task_rng.uniform(0.2, 0.8) for t in tasks}
        self.reference = {t.prompt_text(): t.reference or "x" for t in tasks}
        self.in_flight = 0
        self.busy_since: float | None = None
        self.idle_since: float | None = None
        self.idle = 0.0
        self.occupied = 0.0  # integral of in-flight over time
        self.last_change = 0.0

    def start_clock(self) -> None:
        now = time.perf_counter()
        self.idle, self.occupied, self.last_change, self.idle_since = 0.0, 0.0, now, now

    def _change(self, delta: int) -> None:
        now = time.perf_counter()
        self.occupied += self.in_flight * (now - self.last_change)
        self.last_change = now
        if self.in_flight == 0 and delta > 0 and self.idle_since is not None:
            self.idle += now - self.idle_since
            self.idle_since = None
        self.in_flight += delta
        if self.in_flight == 0:
            self.idle_since = now

    def stop_clock(self) -> tuple[float, float]:
        """(idle seconds, occupancy integral) up to now."""
        self._change(0)
        if self.idle_since is not None:
            self.idle += time.perf_counter() - self.idle_since
            self.idle_since = time.perf_counter()
        return self.idle, self.occupied

    async def generate(self, messages: list[dict[str, Any]], params: SamplingParams, *, n: int = 1,
                       tools: list[dict[str, Any]] | None = None) -> list[Completion]:  # fmt: skip
        prompt = messages[0]["content"]
        retry = len(messages) > 1
        p = min(1.0, self.skill[prompt] + (0.3 if retry else 0.0))
        expr = self.reference[prompt] if self.rng.random() < p else self.rng.choice(["x", "x + 1", "-x", "0"])
        seconds = self.scale[prompt] * self.rng.lognormvariate(math.log(self.median), self.sigma)
        async with self.capacity:
            self._change(+1)
            try:
                await asyncio.sleep(seconds)
            finally:
                self._change(-1)
        text = f"```python\ndef f(x):\n    return {expr}\n```"
        return [Completion(text=text, completion_tokens=len(text))] * n


def percentile(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))]


async def baseline(tasks: list[Task], policy: SimulatedPolicy, grader: Grader, cfg: EpisodeConfig, group: int,
                   batch: int) -> tuple[int, list[float]]:  # fmt: skip
    """Synchronous batches: every turn waits for the slowest generation, then the slowest check."""
    episodes, latencies = 0, []
    for i in range(0, len(tasks), batch):
        t0 = time.perf_counter()
        convs = [(t, [dict(m) for m in t.messages()]) for t in tasks[i : i + batch] for _ in range(group)]
        finals = [""] * len(convs)
        active = list(range(len(convs)))
        for turn in range(cfg.max_turns):
            replies = await asyncio.gather(*(policy.generate(convs[j][1], cfg.sampling) for j in active))
            for j, r in zip(active, replies, strict=True):
                finals[j] = r[0].text
                convs[j][1].append({"role": "assistant", "content": r[0].text})
            if turn + 1 == cfg.max_turns:
                break
            checks = await asyncio.gather(
                *(Toolbox(convs[j][0], grader.sandbox).check_visible(finals[j]) for j in active)
            )
            still = []
            for j, (obs, verdict, _err) in zip(active, checks, strict=True):
                if verdict != "pass":
                    convs[j][1].append({"role": "user", "content": obs})
                    still.append(j)
            active = still
            if not active:
                break
        await asyncio.gather(*(grader.grade(t, f) for (t, _), f in zip(convs, finals, strict=True)))
        episodes += len(convs)
        latencies.append(time.perf_counter() - t0)
    return episodes, latencies


async def scheduled(tasks: list[Task], policy: SimulatedPolicy, grader: Grader, cfg: RolloutConfig, batch: int,
                    costs: CostModel) -> tuple[int, list[float]]:  # fmt: skip
    episodes, latencies, ready = 0, [], 0
    last = time.perf_counter()
    async for g in RolloutScheduler(policy, grader, cfg, costs=costs).run(tasks):
        episodes += len(g.episodes)
        ready += 1
        if ready % batch == 0:
            now = time.perf_counter()
            latencies.append(now - last)
            last = now
    return episodes, latencies


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tasks", type=int, default=64)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--capacity", type=int, default=32, help="Concurrent requests the policy serves.")
    parser.add_argument("--max-turns", type=int, default=3)
    parser.add_argument("--gen-median", type=float, default=0.2, help="Median generation seconds.")
    parser.add_argument("--gen-sigma", type=float, default=1.0, help="Log-normal sigma of generation time.")
    parser.add_argument("--pool-size", type=int, default=None)
    parser.add_argument("--json", dest="json_path", default=None)
    args = parser.parse_args()
    if args.repeats < 1 or args.tasks < 1 or args.capacity < args.group_size:
        parser.error("need --repeats >= 1, --tasks >= 1 and --capacity >= --group-size")
    tasks = load_source(f"family:expressions?n={args.tasks}&seed=7")
    batch = max(1, args.capacity // args.group_size)
    ep_cfg = EpisodeConfig(mode="feedback", max_turns=args.max_turns)
    ro_cfg = RolloutConfig(group_size=args.group_size, policy_concurrency=args.capacity,
                           max_groups_in_flight=2 * batch, episode=ep_cfg)  # fmt: skip
    results: dict[str, dict[str, list[float]]] = {
        k: {"eps": [], "idle": [], "occupancy": [], "p50": [], "p99": []} for k in ("baseline", "dojo")
    }
    async with AsyncSandbox(pool_size=args.pool_size) as sandbox:
        grader = Grader(sandbox)
        costs = CostModel()
        warm = SimulatedPolicy(tasks, args.capacity, args.gen_median, args.gen_sigma, seed=99)
        async for _ in RolloutScheduler(warm, grader, ro_cfg, costs=costs).run(tasks):  # learns the costs
            pass
        for r in range(args.repeats):
            for name in ("baseline", "dojo"):
                policy = SimulatedPolicy(tasks, args.capacity, args.gen_median, args.gen_sigma, seed=r)
                policy.start_clock()
                t0 = time.perf_counter()
                if name == "baseline":
                    n, lat = await baseline(tasks, policy, grader, ep_cfg, args.group_size, batch)
                else:
                    n, lat = await scheduled(tasks, policy, grader, ro_cfg, batch, costs)
                wall = time.perf_counter() - t0
                idle, occupied = policy.stop_clock()
                out = results[name]
                out["eps"].append(n / wall)
                out["idle"].append(idle / wall)
                out["occupancy"].append(occupied / (wall * args.capacity))
                out["p50"].append(percentile(lat, 0.5))
                out["p99"].append(percentile(lat, 0.99))
                print(f"round {r + 1} {name}: {n} episodes in {wall:.1f} s", flush=True)
    med = {k: {m: statistics.median(v) for m, v in d.items()} for k, d in results.items()}
    print(f"\n{args.tasks} tasks x {args.group_size} samples, up to {args.max_turns} turns, policy capacity "
          f"{args.capacity}, generation log-normal(median {args.gen_median} s, sigma {args.gen_sigma}); "
          f"medians of {args.repeats} rounds\n")  # fmt: skip
    print("| schedule | episodes/s | policy idle | policy occupancy | batch latency p50 | p99 |")
    print("|---|---|---|---|---|---|")
    for name, label in (("baseline", "synchronous batches"), ("dojo", "dojo RolloutScheduler")):
        m = med[name]
        cells = f"{m['eps']:.1f} | {m['idle']:.1%} | {m['occupancy']:.1%} | {m['p50']:.2f} s | {m['p99']:.2f} s"
        print(f"| {label} | {cells} |")
    ratio = statistics.median(d / b for d, b in zip(results["dojo"]["eps"], results["baseline"]["eps"], strict=True))
    print(f"\nspeed-up (median of per-round ratios): {ratio:.2f}x")
    if args.json_path:
        with open(args.json_path, "w") as f:
            json.dump({"args": vars(args), "results": results, "medians": med, "speedup": ratio}, f, indent=2)


if __name__ == "__main__":
    asyncio.run(main())
