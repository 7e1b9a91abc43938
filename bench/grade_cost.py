"""What grading one HumanEval reference costs, against a print(1) run (issue #35, part 4).

    .venv/bin/python bench/grade_cost.py [--rounds 3]

One task at a time on a pool of 2 slots, each round over the 164 references (assert form), after a
warm-up round (the rewritten checks are cached): ``Grader.grade`` wall time, the harness run alone
(``AsyncSandbox.run(harness=True)``: host-observed wall, and the zygote's wall and CPU), and a
``print(1)`` run interleaved with them, each as a median; then page faults per harness run and per
print(1) run (the zygotes' ``cminflt``: every fault of every process a run starts). Prints the
ratios the issue's targets are stated in: a grade's median latency over a print(1) run's.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from pathlib import Path

from dojo.rewards import Grader
from dojo.rewards.graders import DEFAULT_GRADING_LIMITS, candidate_code, check_program
from dojo.rewards.harness import SOLUTION_FILE, assert_job, harness_source, job_stdin, new_nonce
from dojo.sandbox import AsyncSandbox, InputFile, Limits, Program
from dojo.tasks import Task, load_humaneval

PRINT_ONE = Program(language="python", source="print(1)\n")


def harness_program(task: Task) -> Program:
    """The program ``Grader.grade`` runs for ``task``'s reference, built the same way."""
    assert task.entry_point
    code = candidate_code(task, task.reference or "")
    rewritten, context = check_program(task)
    job = assert_job(task.entry_point, [src for src, _ in rewritten], task.float_tolerance, context)
    files = [InputFile(path=SOLUTION_FILE, content=code.encode())]
    return Program(language="python", source=harness_source(), files=files, stdin=job_stdin(new_nonce(), job))


def child_faults(sandbox: AsyncSandbox) -> int:
    """Page faults of every process the pool's zygotes have started and reaped so far."""
    total = 0
    for slot in sandbox.pool.slots():
        zygote = Path(f"/proc/{slot.pid}/task/{slot.pid}/children").read_text().split()[0]
        total += int(Path(f"/proc/{zygote}/stat").read_text().rsplit(")", 1)[1].split()[8])
    return total


def ms(values: list[float]) -> float:
    return statistics.median(values) * 1e3


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    tasks = load_humaneval("assert")
    programs = [harness_program(t) for t in tasks]
    grade_s: list[float] = []
    harness_s: list[float] = []
    harness_wall: list[float] = []
    harness_cpu: list[float] = []
    print_s: list[float] = []
    print_wall: list[float] = []
    print_cpu: list[float] = []
    async with AsyncSandbox(pool_size=2) as sandbox:
        grader = Grader(sandbox)
        for task in tasks:  # warm-up: slots started, checks rewritten and cached, harness preloaded
            reward = await grader.grade(task, task.reference or "")
            if reward.value != 1.0:
                raise SystemExit(f"{task.id}: the reference scored {reward.value} ({reward.error})")
        for _ in range(args.rounds):
            for task, program in zip(tasks, programs, strict=True):
                start = time.perf_counter()
                await grader.grade(task, task.reference or "")
                grade_s.append(time.perf_counter() - start)
                start = time.perf_counter()
                result = await sandbox.run(program, DEFAULT_GRADING_LIMITS, harness=True)
                harness_s.append(time.perf_counter() - start)
                harness_wall.append(result.wall_time)
                harness_cpu.append(result.cpu_time)
                start = time.perf_counter()
                result = await sandbox.run(PRINT_ONE, Limits())
                print_s.append(time.perf_counter() - start)
                print_wall.append(result.wall_time)
                print_cpu.append(result.cpu_time)
        before = child_faults(sandbox)
        for program in programs:
            await sandbox.run(program, DEFAULT_GRADING_LIMITS, harness=True)
        harness_faults = (child_faults(sandbox) - before) / len(programs)
        before = child_faults(sandbox)
        for _ in programs:
            await sandbox.run(PRINT_ONE, Limits())
        print_faults = (child_faults(sandbox) - before) / len(programs)
    print(f"| what (median of {len(grade_s)}) | host-observed ms | zygote wall ms | run CPU ms | page faults |")
    print("|---|---|---|---|---|")
    print(f"| Grader.grade, HumanEval reference | {ms(grade_s):.2f} | | | |")
    print(f"| its harness run alone | {ms(harness_s):.2f} | {ms(harness_wall):.2f} | {ms(harness_cpu):.2f} | "
          f"{harness_faults:.0f} |")  # fmt: skip
    print(f"| print(1) | {ms(print_s):.2f} | {ms(print_wall):.2f} | {ms(print_cpu):.2f} | {print_faults:.0f} |")
    print(f"\ngrade / print(1): {ms(grade_s) / ms(print_s):.2f}x (target <= 2x); "
          f"harness run / print(1): {ms(harness_s) / ms(print_s):.2f}x")  # fmt: skip


if __name__ == "__main__":
    asyncio.run(main())
