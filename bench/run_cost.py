"""What one sandbox run costs the machine, and the same for two source trees side by side (issue #21).

    .venv/bin/python bench/run_cost.py faults [--source 'print(1)'] [--rounds 3]
    .venv/bin/python bench/run_cost.py ab OLD_SRC NEW_SRC [--pairs 6] [--runs 1500]

``faults``: page faults per run. A pool of 4 slots runs ``--source`` 400 times (4 at a time) after a
warm-up; the runs are children of their slot's zygote, so the zygotes' ``cminflt`` (from
``/proc/<pid>/stat``) counts every page fault of every run. One figure per round, each a fresh
sandbox (the page layout, and so the count, moves by a few faults between zygotes). Also the
zygotes' own faults per run.

``ab``: throughput and CPU per run of ``print(1)`` at concurrency 8 on the default pool, the
``src`` directory of two checkouts alternating round by round (OLD, NEW, NEW, OLD, ...), each round a
fresh process, so that the machine's drift hits both alike. CPU per run is the whole machine's busy
time (``/proc/stat``) over the round, divided by the runs; steal is the hypervisor's share, for
judging a noisy round. Prints each round, the medians and the median of the per-pair ratios.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

FAULTS = r"""
import asyncio, sys
from pathlib import Path
from dojo.sandbox import AsyncSandbox, Program

def stat(pid):
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[7]), int(fields[8])  # minflt, cminflt

async def main(source, expected):
    async with AsyncSandbox(pool_size=4) as sb:
        program = Program(language="python", source=source)
        for _ in range(40):
            results = await asyncio.gather(*(sb.run(program) for _ in range(4)))
        assert all(r.stdout == expected for r in results), results
        zygotes = [int(Path(f"/proc/{s.pid}/task/{s.pid}/children").read_text().split()[0]) for s in sb.pool.slots()]
        before = [stat(z) for z in zygotes]
        for _ in range(100):
            await asyncio.gather(*(sb.run(program) for _ in range(4)))
        after = [stat(z) for z in zygotes]
    runs = sum(b[1] - a[1] for a, b in zip(before, after)) / 400
    own = sum(b[0] - a[0] for a, b in zip(before, after)) / 400
    print(f"{runs:.1f} {own:.1f}")

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""

ROUND = r"""
import asyncio, os, sys, time
from pathlib import Path
from dojo.sandbox import AsyncSandbox
from dojo.sandbox.loadtest import WORKLOADS, closed_loop, sandbox_runner

def cpu():
    v = [int(x) for x in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    return sum(v[:3]) + sum(v[5:7]), v[7]  # busy (user, nice, system, irq, softirq), steal

async def main(runs):
    async with AsyncSandbox() as sb:
        source, expected = WORKLOADS["print(1)"]
        runner = sandbox_runner(sb, source, expected)
        await closed_loop(runner, 8, 200)
        (busy0, steal0), t0 = cpu(), time.perf_counter()
        load = await closed_loop(runner, 8, runs)
        (busy1, steal1), dt = cpu(), time.perf_counter() - t0
    hz = os.sysconf("SC_CLK_TCK")
    print(f"{runs / dt:.1f} {(busy1 - busy0) / hz / runs * 1e3:.3f} {load.wrong} {(steal1 - steal0) / hz / dt:.2f}")

asyncio.run(main(int(sys.argv[1])))
"""


def run_python(code: str, args: list[str], src: Path | None = None) -> str:
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = str(src)
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"a round failed:\n{done.stderr[-3000:]}")
    return done.stdout.strip()


def faults(args: argparse.Namespace) -> None:
    rows = [run_python(FAULTS, [args.source, args.expected]).split() for _ in range(args.rounds)]
    runs = [float(r[0]) for r in rows]
    own = statistics.mean(float(r[1]) for r in rows)
    each = ", ".join(f"{x:.1f}" for x in runs)
    mean = statistics.mean(runs)
    print(f"page faults per run of {args.source!r}: {each} (mean {mean:.1f}); the zygotes' own: {own:.1f}")


def ab(args: argparse.Namespace) -> None:
    trees = {"old": args.old.resolve(), "new": args.new.resolve()}
    for tree in trees.values():
        sandbox = tree / "dojo" / "sandbox"  # the zygote: one file before issue #35, the guest package since
        if not ((sandbox / "zygote.py").is_file() or (sandbox / "guest" / "zygote.py").is_file()):
            raise SystemExit(f"{tree} is not a dojo src directory (no dojo/sandbox/[guest/]zygote.py in it)")
    results: dict[str, list[tuple[float, float]]] = {"old": [], "new": []}
    for i in range(args.pairs):
        for way in ("old", "new") if i % 2 == 0 else ("new", "old"):
            rps, cpu, wrong, steal = run_python(ROUND, [str(args.runs)], trees[way]).split()
            results[way].append((float(rps), float(cpu)))
            print(f"{way}: {float(rps):.0f} runs/s, {float(cpu):.3f} ms CPU a run, {wrong} wrong, steal {steal}")
    for way, rows in results.items():
        print(f"{way} ({trees[way]}): median {statistics.median(r[0] for r in rows):.0f} runs/s, "
              f"{statistics.median(r[1] for r in rows):.3f} ms CPU a run")  # fmt: skip
    pairs = list(zip(results["new"], results["old"], strict=True))
    print(f"new / old, median of {len(pairs)} pairs: runs/s {statistics.median(n[0] / o[0] for n, o in pairs):.3f}, "
          f"CPU a run {statistics.median(n[1] / o[1] for n, o in pairs):.3f}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    f = sub.add_parser("faults", help="page faults per run")
    f.add_argument("--source", default="print(1)")
    f.add_argument("--expected", default="1\n", help="the stdout each run must print")
    f.add_argument("--rounds", type=int, default=3)
    a = sub.add_parser("ab", help="two source trees, alternating")
    a.add_argument("old", type=Path, help="the src directory of one checkout")
    a.add_argument("new", type=Path, help="the src directory of the other")
    a.add_argument("--pairs", type=int, default=6)
    a.add_argument("--runs", type=int, default=1500)
    args = parser.parse_args()
    if args.command == "faults":
        if args.rounds < 1:
            parser.error("--rounds must be >= 1")
        faults(args)
    else:
        if args.pairs < 1 or args.runs < 10:
            parser.error("--pairs must be >= 1 and --runs >= 10")
        ab(args)


if __name__ == "__main__":
    main()
