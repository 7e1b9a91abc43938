"""Closed-loop load against the sandbox and against the naive way (a fresh interpreter per run).

Used by ``bench/sandbox.py`` and by the summary at the end of ``dojo demo``.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from dojo.sandbox.backend import SandboxAPI
from dojo.sandbox.program import Program
from dojo.sandbox.verdict import Verdict

PRINT_ONE = "print(1)\n"
HUMANEVAL_STYLE = """from typing import List


def has_close_elements(numbers: List[float], threshold: float) -> bool:
    for idx, elem in enumerate(numbers):
        for idx2, elem2 in enumerate(numbers):
            if idx != idx2 and abs(elem - elem2) < threshold:
                return True
    return False


assert has_close_elements([1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.3) is True
assert has_close_elements([1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.05) is False
assert has_close_elements([1.0, 2.0, 5.9, 4.0, 5.0], 0.95) is True
assert has_close_elements([1.0, 2.0, 5.9, 4.0, 5.0], 0.8) is False
assert has_close_elements([1.1, 2.2, 3.1, 4.1, 5.1], 0.5) is False
print("ok")
"""
WORKLOADS = {"print(1)": (PRINT_ONE, "1"), "humaneval-style": (HUMANEVAL_STYLE, "ok")}


@dataclass
class LoadResult:
    runs: int
    seconds: float
    latencies: list[float]
    wrong: int  # finished "successfully" with the wrong stdout, or failed

    @property
    def throughput(self) -> float:
        return self.runs / self.seconds if self.seconds else 0.0

    def percentile(self, q: float) -> float:
        data = sorted(self.latencies)
        if not data:
            return 0.0
        return data[min(len(data) - 1, int(q * len(data)))]

    @property
    def p50(self) -> float:
        return statistics.median(self.latencies) if self.latencies else 0.0


async def closed_loop(one_run: Callable[[], Awaitable[bool]], concurrency: int, runs: int) -> LoadResult:
    """``concurrency`` workers issue ``runs`` runs back to back; each run returns True when correct."""
    latencies: list[float] = []
    wrong = 0
    remaining = runs

    async def worker() -> None:
        nonlocal remaining, wrong
        while remaining > 0:
            remaining -= 1
            t0 = time.perf_counter()
            ok = await one_run()
            latencies.append(time.perf_counter() - t0)
            if not ok:
                wrong += 1

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return LoadResult(runs, time.perf_counter() - start, latencies, wrong)


def sandbox_runner(
    sandbox: SandboxAPI, source: str, expected: str, environment: str | None = None
) -> Callable[[], Awaitable[bool]]:
    program = Program(language="python", source=source, environment=environment)

    async def one() -> bool:
        result = await sandbox.run(program)
        return result.verdict is Verdict.ACCEPTED and result.stdout.strip() == expected

    return one


def naive_runner(
    python: str, source: str, expected: str, python_path: str | None = None
) -> Callable[[], Awaitable[bool]]:
    """The way RL scripts often do it: a fresh ``python3 -I -S -c`` per run, no isolation at all
    (with ``python_path``: ``-S -s`` and that PYTHONPATH, to import an environment's packages)."""
    flags = ("-I", "-S") if python_path is None else ("-S", "-s")
    env = None if python_path is None else {"PYTHONPATH": python_path, "PATH": "/usr/bin:/bin"}

    async def one() -> bool:
        proc = await asyncio.create_subprocess_exec(
            python, *flags, "-c", source,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env,
        )  # fmt: skip
        out, _ = await proc.communicate()
        return proc.returncode == 0 and out.decode().strip() == expected

    return one
