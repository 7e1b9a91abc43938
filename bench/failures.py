"""What a failing program costs against a passing one: plain runs and grades, through one pool.

    .venv/bin/python bench/failures.py [--repeats 5] [--runs 600] [--pool-size 4]

Early in RL training most of a policy's programs fail, and many fail with an uncaught exception,
whose traceback is the feedback the policy reads. Each round runs, all at once through one sandbox
pool, ``--runs`` plain runs of each program below (checking each one's verdict and output), then
grades the 164 HumanEval tasks (assert form) with their references, with completions whose module
raises as it loads, and with completions whose function raises when called (checking every
reward). It prints runs (or tasks) per second and the machine's busy CPU per run (``/proc/stat``),
as medians over the rounds, and each failing workload's CPU as a multiple of its passing one's.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from dojo.rewards import Grader
from dojo.sandbox import AsyncSandbox, Program, Verdict
from dojo.tasks import Task, load_humaneval
from grading import busy_cpu_seconds  # (bench/grading.py: a script's own directory is on sys.path)

# name -> (program, the verdict it must get, what its output must end with)
PLAIN = {
    "print(1)": ("print(1)\n", Verdict.ACCEPTED, "1\n"),
    "raises (two frames)": ("def f(x):\n    return x[3] * 2\n\nf([1, 2])\n", Verdict.RUNTIME_ERROR,
                            "IndexError: list index out of range\n"),
    "syntax error": ("x = 1\ndef f(:\n    pass\n", Verdict.RUNTIME_ERROR, "SyntaxError: invalid syntax\n"),
}  # fmt: skip

# name -> (completion appended to the prompt, the reward it must get)
GRADED = {
    "HumanEval references": (None, 1.0),
    "module raises as it loads": ("    pass\n\nraise RuntimeError('not done')\n", 0.0),
    "function raises when called": ("    raise NotImplementedError\n", 0.0),
}


async def plain_round(sandbox: AsyncSandbox, source: str, verdict: Verdict, tail: str, n: int) -> tuple[float, float]:
    program = Program(language="python", source=source)
    busy, start = busy_cpu_seconds(), time.perf_counter()
    results = await sandbox.run_many([program] * n)
    elapsed, busy = time.perf_counter() - start, busy_cpu_seconds() - busy
    wrong = [r for r in results if r.verdict is not verdict or not (r.stdout + r.stderr).endswith(tail)]
    if wrong:
        raise RuntimeError(f"{len(wrong)} runs of {source!r} went wrong: {wrong[0].verdict} {wrong[0].stderr[-300:]}")
    return n / elapsed, busy * 1e3 / n


async def graded_round(grader: Grader, tasks: list[Task], completion: str | None, want: float) -> tuple[float, float]:
    items = [(t, (t.reference or "") if completion is None else completion) for t in tasks]
    busy, start = busy_cpu_seconds(), time.perf_counter()
    rewards = await grader.grade_many(items)
    elapsed, busy = time.perf_counter() - start, busy_cpu_seconds() - busy
    wrong = [r for r in rewards if r.value != want]
    if wrong:
        raise RuntimeError(f"{len(wrong)} grades were not {want}: {wrong[0].value} {wrong[0].error}")
    return len(items) / elapsed, busy * 1e3 / len(items)


async def main(repeats: int, runs: int, pool_size: int) -> None:
    tasks = load_humaneval("assert")
    rows: dict[str, list[tuple[float, float]]] = {name: [] for name in [*PLAIN, *GRADED]}
    async with AsyncSandbox(pool_size=pool_size) as sandbox:
        grader = Grader(sandbox)
        for round_ in range(repeats + 1):  # the first round warms the slots and the checks' cache
            for name, (source, verdict, tail) in PLAIN.items():
                figures = await plain_round(sandbox, source, verdict, tail, runs)
                if round_:
                    rows[name].append(figures)
            for name, (completion, want) in GRADED.items():
                figures = await graded_round(grader, tasks, completion, want)
                if round_:
                    rows[name].append(figures)
    medians = {name: (statistics.median(r for r, _ in got), statistics.median(c for _, c in got))
               for name, got in rows.items()}  # fmt: skip
    base = {**{name: "print(1)" for name in PLAIN}, **{name: "HumanEval references" for name in GRADED}}
    print(f"pool {pool_size}, {repeats} rounds, {runs} runs of each program and {len(tasks)} tasks a round (medians)\n")
    print("| workload | runs or tasks/s | machine CPU ms each | CPU vs the passing one |")
    print("|---|---|---|---|")
    for name, (rate, cpu) in medians.items():
        print(f"| {name} | {rate:,.0f} | {cpu:.2f} | {cpu / medians[base[name]][1]:.2f}x |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5, help="timed rounds (after one warm-up round)")
    parser.add_argument("--runs", type=int, default=600, help="plain runs of each program a round")
    parser.add_argument("--pool-size", type=int, default=4, help="sandbox slots")
    args = parser.parse_args()
    if args.repeats < 1 or args.runs < 1 or args.pool_size < 1:
        parser.error("--repeats, --runs and --pool-size must each be 1 or more")
    asyncio.run(main(args.repeats, args.runs, args.pool_size))
