"""The analysis families' costs: ``dojo tasks audit`` of 1,000 tasks of ``family:data_analysis`` and of
``family:scientific`` (reference graded twice, three trivial candidates), and the sandbox time of one
data-analysis run with pandas preloaded (the reference program of level-3 tasks: two tables, one of
them Parquet, a join). Then what bounds the audit, per run: an empty program (``pass``) run in
``dojo-data`` against one in the default slots, 300 at once each, in busy machine CPU per run (the
fork and exit of a zygote with pandas and pyarrow imported, ~60 MB of its own memory, against a
plain interpreter's). Prints the numbers; asserts nothing.

    .venv/bin/python bench/analysis.py [--tasks 1000] [--runs 200]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from dojo.rewards.analysis import analysis_program
from dojo.rewards.audit import audit_tasks
from dojo.rewards.extract import extract_code
from dojo.sandbox import AsyncSandbox, Program
from dojo.tasks import load_source
from dojo.tasks.analysis import DATA_ENVIRONMENT, environment_ref
from grading import busy_cpu_seconds  # (bench/grading.py: a script's own directory is on sys.path)


async def empty_run_cost(sandbox: AsyncSandbox, environment: str | None, n: int = 300) -> float:
    """Busy machine CPU ms per ``pass`` run, ``n`` at once, in ``environment``'s slots."""
    program = Program(language="python", source="pass\n", environment=environment)
    await sandbox.run_many([program] * 8)  # (the slots start)
    busy = busy_cpu_seconds()
    results = await sandbox.run_many([program] * n)
    assert all(r.ok for r in results), [r.verdict for r in results if not r.ok][:3]
    return (busy_cpu_seconds() - busy) * 1e3 / n


async def main(n_tasks: int, runs: int) -> None:
    async with AsyncSandbox() as sandbox:
        for family in ("data_analysis", "scientific"):
            start = time.perf_counter()
            tasks = load_source(f"family:{family}?n={n_tasks}")
            generated = time.perf_counter() - start
            report = await audit_tasks(tasks, sandbox)
            summary = report.summary()
            refs = [r for t in report.tasks for r in t.reference_rewards]
            passing = sum(r == 1.0 for r in refs) / max(1, len(refs))
            trivial = sum(bool(t.trivial_passed) for t in report.tasks)
            print(
                f"family:{family}: {n_tasks} tasks generated in {generated:.1f} s, audited in {report.seconds:.1f} s "
                f"(total {generated + report.seconds:.1f} s); verifiable {summary['verifiable']}, "
                f"reference 1.0 in {passing:.1%} of its gradings, trivial passes {trivial}, "
                f"problems {summary['problems']}"
            )
        tasks = load_source(f"family:data_analysis?n={runs}&difficulty=0.5-0.74")
        programs = [analysis_program(t, extract_code(t.reference or "", "python")) for t in tasks]
        await sandbox.run(programs[0])  # the environment's slots start
        wall, cpu = [], []
        for program in programs:
            result = await sandbox.run(program)
            assert result.ok, result.stderr
            wall.append(result.wall_time * 1000)
            cpu.append(result.cpu_time * 1000)
        print(
            f"data-analysis run (pandas preloaded, {runs} level-3 references, one at a time): sandbox wall "
            f"p50 {statistics.median(wall):.1f} ms, p90 {statistics.quantiles(wall, n=10)[-1]:.1f} ms; "
            f"cpu p50 {statistics.median(cpu):.1f} ms"
        )
        data, plain = [], []
        for _ in range(3):
            data.append(await empty_run_cost(sandbox, environment_ref(DATA_ENVIRONMENT)))
            plain.append(await empty_run_cost(sandbox, None))
        print(
            f"an empty run (pass, 300 at once, medians of 3): {statistics.median(data):.2f} ms of busy machine CPU "
            f"in dojo-data against {statistics.median(plain):.2f} ms in the default slots: what each of the "
            f"audit's runs pays before its program does anything"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    asyncio.run(main(args.tasks, args.runs))
