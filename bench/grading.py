"""Grading benchmark: HumanEval references and wrong answers graded through dojo's sandbox.

    .venv/bin/python bench/grading.py [--repeats 3] [--json out.json]

Per round it grades, at once (the pool bounds concurrency): the 164 HumanEval references in
assert form, the 147 convertible ones in function form, and 164 wrong completions (``return
None``); it prints tasks/s for each (median over --repeats rounds) and checks the verdicts (every
reference 1.0, every wrong answer 0.0), and as many ``print(1)`` runs (no grading: the cost of a
run alone). It then times ``audit_tasks`` over all of HumanEval once per round. Prints a Markdown
table, with the machine's busy CPU time per task (all processes, from /proc/stat: on a shared VM a
steadier figure than tasks/s, which other tenants move), and last the references' own work: every
reference and its check run one after another in one sandboxed process
(``bench/programs/references_own_work.py``): the work itself, warm (without the first-time
imports and cold caches a grade's fresh process pays).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

from dojo.rewards import Grader
from dojo.rewards.audit import audit_tasks
from dojo.sandbox import AsyncSandbox, Limits, Program
from dojo.tasks import Task, load_humaneval

OWN_WORK = Path(__file__).resolve().parent / "programs" / "references_own_work.py"
PRINT_ONE = "print(1) runs (no grading)"


def busy_cpu_seconds() -> float:
    """CPU time every core of this machine has spent busy since boot (/proc/stat: user, nice, system,
    irq, softirq, steal), in seconds."""
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:9]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


async def timed_grading(grader: Grader, items: list[tuple[Task, str]], want: float) -> tuple[float, float, int]:
    """Tasks/s, busy machine CPU ms per task, and how many verdicts were not ``want``."""
    busy, start = busy_cpu_seconds(), time.perf_counter()
    rewards = await grader.grade_many(items)
    elapsed, busy = time.perf_counter() - start, busy_cpu_seconds() - busy
    wrong = sum(r.value != want for r in rewards)
    return len(items) / elapsed, busy * 1e3 / len(items), wrong


async def timed_runs(sandbox: AsyncSandbox, n: int) -> tuple[float, float, int]:
    """Runs/s, busy machine CPU ms per run, and how many did not print 1, of ``n`` print(1) runs at once."""
    program = Program(language="python", source="print(1)\n")
    busy, start = busy_cpu_seconds(), time.perf_counter()
    results = await sandbox.run_many([program] * n)
    elapsed, busy = time.perf_counter() - start, busy_cpu_seconds() - busy
    return n / elapsed, busy * 1e3 / n, sum(r.stdout != "1\n" for r in results)


async def references_own_work(sandbox: AsyncSandbox, tasks: list[Task]) -> dict[str, float]:
    """Each task's reference and check, median CPU ms, run one after another in one sandboxed process."""
    jobs = [[t.id, t.reference or "", t.tests[0].code or "", t.entry_point] for t in tasks]
    program = Program(language="python", source=OWN_WORK.read_text(), stdin=json.dumps(jobs))
    result = await sandbox.run(program, Limits(cpu_time=120, wall_time=240))
    if not result.ok:
        raise RuntimeError(f"the references' own work did not run: {result.verdict.value} {result.stderr[-500:]}")
    return {str(k): float(v) for k, v in json.loads(result.stdout).items()}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--pool-size", type=int, default=None)
    parser.add_argument("--json", dest="json_path", default=None)
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    asserts, functions = load_humaneval("assert"), load_humaneval("function")
    workloads: dict[str, tuple[list[tuple[Task, str]], float]] = {
        "HumanEval references, assert form": ([(t, t.reference or "") for t in asserts], 1.0),
        "HumanEval references, function form": ([(t, t.reference or "") for t in functions], 1.0),
        "wrong completions (raise), assert form": ([(t, "    raise NotImplementedError\n") for t in asserts], 0.0),
    }
    rows = [*workloads, PRINT_ONE]
    rates: dict[str, list[float]] = {k: [] for k in rows}
    cpu_ms: dict[str, list[float]] = {k: [] for k in rows}
    mistakes: dict[str, int] = {k: 0 for k in rows}
    audits: list[float] = []
    unverifiable = 0
    async with AsyncSandbox(pool_size=args.pool_size) as sandbox:
        grader = Grader(sandbox)
        await grader.grade_many(workloads["HumanEval references, assert form"][0][:16])  # warm-up
        for _ in range(args.repeats):
            for name, (items, want) in workloads.items():
                rate, cpu, wrong = await timed_grading(grader, items, want)
                rates[name].append(rate)
                cpu_ms[name].append(cpu)
                mistakes[name] += wrong
            rate, cpu, wrong = await timed_runs(sandbox, len(asserts))
            rates[PRINT_ONE].append(rate)
            cpu_ms[PRINT_ONE].append(cpu)
            mistakes[PRINT_ONE] += wrong
            start = time.perf_counter()
            report = await audit_tasks(asserts, sandbox)
            audits.append(time.perf_counter() - start)
            unverifiable += len(report.unverifiable)
        own = await references_own_work(sandbox, asserts)
        pool = sandbox.pool_size
    print(f"pool size {pool}, {args.repeats} rounds, medians\n")
    print("| workload | tasks | tasks/s (median) | min-max | machine CPU ms/task (median) | wrong verdicts |")
    print("|---|---|---|---|---|---|")
    for name in rows:
        r, c = rates[name], statistics.median(cpu_ms[name])
        count = len(workloads[name][0]) if name in workloads else len(asserts)
        spread = f"{min(r):.0f}-{max(r):.0f}"
        print(f"| {name} | {count} | {statistics.median(r):.0f} | {spread} | {c:.2f} | {mistakes[name]} |")
    heaviest = sorted(own.items(), key=lambda kv: -kv[1])[:3]
    print(
        f"\nthe references' own work (each reference and its check, one after another in one sandboxed process, "
        f"median of 3 passes): {sum(own.values()) / len(own):.2f} ms of CPU per task on average, "
        f"{statistics.median(own.values()):.3f} ms at the median; heaviest "
        + ", ".join(f"{k} {v:.1f} ms" for k, v in heaviest)
    )
    print(
        f"\n`dojo tasks audit humaneval` work (audit_tasks, 164 tasks, 2 reference runs + 9 trivial candidates each): "
        f"median {statistics.median(audits):.1f} s (min {min(audits):.1f}, max {max(audits):.1f}); "
        f"unverifiable tasks found: {unverifiable}"
    )
    if args.json_path:
        out: dict[str, Any] = {"rates": rates, "cpu_ms": cpu_ms, "mistakes": mistakes, "audit_seconds": audits,
                               "pool_size": pool, "own_work_ms": own}  # fmt: skip
        with open(args.json_path, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    asyncio.run(main())
