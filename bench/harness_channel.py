"""Per-call cost of the grading harness's channel between the trusted process and the candidate's.

    .venv/bin/python bench/harness_channel.py [--calls 2000] [--repeats 7]

Grades one function-form task twice per round: with 1 test (2 calls: every case runs twice) and
with ``--calls``/2 tests (``--calls`` calls), through one slot. The difference in the run's own
wall time (the sandbox's ``wall_time``: from fork to exit, no host overhead), divided by the extra
calls, is what one call costs: encode the arguments, write them to the candidate's process, call,
encode the return value, write it back, decode it strictly, report it. Prints medians over
``--repeats`` rounds, for a small value (an int) and a larger one (a list of 100 floats).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics

from dojo.rewards.harness import function_job, run_harness
from dojo.sandbox import AsyncSandbox, Limits
from dojo.tasks import Task, TestCase

SOURCE = "def f(x):\n    return x\n"
LIMITS = Limits(wall_time=60, cpu_time=60, output=64 << 20)


def task(n: int, value: object) -> Task:
    tests = [TestCase(args=[value], expected=value) for _ in range(n)]
    return Task(id=f"echo-{n}", form="function", prompt="", entry_point="f", tests=tests)


async def run_wall(sandbox: AsyncSandbox, t: Task) -> float:
    """Run the harness on ``t`` (every case twice, as grading does); the run's own wall time."""
    assert t.entry_point
    calls = [(i, c.args, c.kwargs) for i, c in enumerate(t.tests)] * 2
    run = await run_harness(sandbox, SOURCE, function_job(t.entry_point, calls, 1e-6), LIMITS)
    assert len(run.cases) == len(calls) and all("value" in c for c in run.cases), run.result.verdict
    return run.result.wall_time


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    if args.calls < 4 or args.repeats < 1:
        parser.error("--calls must be at least 4 and --repeats at least 1")
    values = {"an int": 7, "a list of 100 floats": [i / 7 for i in range(100)]}
    print(f"calls per run: 2 and {args.calls}; medians of {args.repeats} rounds\n")
    print("| value | run wall, 2 calls | run wall, many calls | per call |")
    print("|---|---|---|---|")
    async with AsyncSandbox(pool_size=1) as sandbox:
        for name, value in values.items():
            small, big = task(1, value), task(args.calls // 2, value)
            await run_wall(sandbox, small)  # warm-up
            walls: dict[str, list[float]] = {"small": [], "big": []}
            for _ in range(args.repeats):
                walls["small"].append(await run_wall(sandbox, small))
                walls["big"].append(await run_wall(sandbox, big))
            s, b = statistics.median(walls["small"]), statistics.median(walls["big"])
            per = (b - s) / (args.calls - 2) * 1e6
            print(f"| {name} | {s * 1e3:.2f} ms | {b * 1e3:.1f} ms | {per:.1f} µs |")


if __name__ == "__main__":
    asyncio.run(main())
