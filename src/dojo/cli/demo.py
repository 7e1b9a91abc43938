"""``dojo demo``: programs in several languages (some hostile) in the sandbox, then a benchmark.

Until the training loop lands this is dojo's embedded default job.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from dojo.sandbox import AsyncSandbox, Limits, Program
from dojo.sandbox.languages import available_languages, default_python
from dojo.sandbox.loadtest import WORKLOADS, closed_loop, naive_runner, sandbox_runner

EXAMPLES: list[tuple[str, str, str, str, Limits | None]] = [
    ("python: stdin", "python", "n = int(input())\nprint(sum(range(n)))\n", "100\n", None),
    (
        "bash: pipeline",
        "bash",
        "seq 1 5 | paste -sd+ | bc 2>/dev/null || echo $((1+2+3+4+5))\n",
        "",
        None,
    ),
    (
        "c: compile + run",
        "c",
        '#include <stdio.h>\nint main(void){printf("%d\\n", 6*7);return 0;}\n',
        "",
        None,
    ),
    ("c++: compile error", "cpp", "int main() { return missing; }\n", "", None),
    ("javascript", "javascript", "console.log([1,2,3].map(x => x * x).join(' '))\n", "", None),
    (
        "python: infinite loop",
        "python",
        "while True:\n    pass\n",
        "",
        Limits(cpu_time=1, wall_time=3),
    ),
    ("python: memory hog", "python", "x = bytearray(1 << 30)\n", "", Limits(memory=64 << 20)),
    (
        "python: output flood",
        "python",
        "import sys\nsys.stdout.write('x' * (100 << 20))\n",
        "",
        None,
    ),
    (
        "python: reach the host",
        "python",
        "import socket\nsocket.create_connection(('127.0.0.1', 22), timeout=1)\n",
        "",
        None,
    ),
    ("bash: fork bomb", "bash", ":(){ :|:& };:\nsleep 5\n", "", Limits(wall_time=2, processes=32)),
    ("python: write /etc", "python", "open('/etc/dojo-was-here', 'w')\n", "", None),
]


async def run_demo(console: Console, quick: bool = False) -> dict[str, Any]:
    here = set(available_languages())
    table = Table("program", "verdict", "limit", "wall ms", "output (first line)", title="dojo sandbox")
    async with AsyncSandbox() as sandbox:
        for title, lang, source, stdin, limits in EXAMPLES:
            if lang not in here:
                table.add_row(title, "[yellow]skipped[/yellow]", "", "", f"{lang} toolchain not installed")
                continue
            result = await sandbox.run(Program(language=lang, source=source, stdin=stdin), limits)
            text = (result.stdout or result.stderr).strip().splitlines()
            first = text[-1][:60] if text else ""
            table.add_row(
                title,
                str(result.verdict),
                str(result.limit or ""),
                f"{result.wall_time * 1000:.1f}",
                first,
            )
        console.print(table)
        summary = await benchmark_summary(sandbox, console, quick)
    return summary


async def benchmark_summary(sandbox: AsyncSandbox, console: Console, quick: bool) -> dict[str, Any]:
    runs = 100 if quick else 300
    python = default_python()
    table = Table(
        "workload",
        "way",
        "p50 ms (c=1)",
        "runs/s (c=8)",
        "wrong",
        title=f"benchmark ({runs} runs each)",
    )
    summary: dict[str, Any] = {}
    for name, (source, expected) in WORKLOADS.items():
        for way, runner in (
            ("dojo sandbox", sandbox_runner(sandbox, source, expected)),
            ("naive python3 -I -S -c", naive_runner(python, source, expected)),
        ):
            c1 = await closed_loop(runner, 1, runs // 3)
            c8 = await closed_loop(runner, 8, runs)
            summary[f"{name} / {way}"] = {
                "p50_ms_c1": round(c1.p50 * 1000, 2),
                "runs_per_s_c8": round(c8.throughput, 1),
                "wrong": c1.wrong + c8.wrong,
            }
            table.add_row(name, way, f"{c1.p50 * 1000:.2f}", f"{c8.throughput:.0f}", str(c1.wrong + c8.wrong))
    console.print(table)
    console.print("Full benchmark: [bold]make bench[/bold] (bench/sandbox.py); numbers in docs/benchmarks.md")
    return summary
