"""A model of where a sandbox run's fork cost goes, to decide how a slot should fork (issue #21).

A slot's zygote forks each run from itself and then does its own bookkeeping (the request, the
pipes, the result) while the run lives: every page it writes after the fork faults once, because
the run shares it (268 such faults per print(1) run, measured from /proc/<zygote>/stat; the run
itself takes 299). The model: a process with an 8 MB preloaded heap forks a child that writes
``--child-pages`` pages and exits, and bookkeeping writes ``--supervisor-pages`` pages per run,

- ``zygote``: in the process that forks (today's design);
- ``server``: in a separate supervisor, while a fork server (which holds the heap and does nothing
  between forks) forks the child: the supervisor's pages are never shared, so they never fault.

It forks plain processes (no sandbox, no candidate code). Prints the wall time and the CPU time
(every process included) per run, median of ``--repeats``.

    python3 bench/fork_server_model.py --repeats 5
"""

from __future__ import annotations

import argparse
import mmap
import os
import statistics
import time

PAGE = 4096


def touch(area: mmap.mmap, pages: int, value: int) -> None:
    for i in range(0, pages * PAGE, PAGE):
        area[i] = value


def run(mode: str, runs: int, child_pages: int, supervisor_pages: int) -> tuple[float, float]:
    heap = mmap.mmap(-1, 8 << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    touch(heap, 2048, 1)
    work = mmap.mmap(-1, 2 << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    touch(work, 512, 1)

    def child() -> None:
        touch(heap, child_pages, 2)
        os._exit(0)

    start, before = time.perf_counter(), os.times()
    if mode == "zygote":
        for _ in range(runs):
            pid = os.fork()
            if pid == 0:
                child()
            touch(work, supervisor_pages, 3)
            os.waitpid(pid, 0)
    else:
        ask_r, ask_w = os.pipe()
        done_r, done_w = os.pipe()
        server = os.fork()
        if server == 0:
            os.close(ask_w)
            os.close(done_r)
            while os.read(ask_r, 1):
                pid = os.fork()
                if pid == 0:
                    child()
                os.waitpid(pid, 0)
                os.write(done_w, b"x")
            os._exit(0)
        os.close(ask_r)
        os.close(done_w)
        for _ in range(runs):
            os.write(ask_w, b"x")
            touch(work, supervisor_pages, 3)
            os.read(done_r, 1)
        os.close(ask_w)
        os.waitpid(server, 0)
    after = os.times()
    cpu = sum(getattr(after, f) - getattr(before, f) for f in ("user", "system", "children_user", "children_system"))
    heap.close()
    work.close()
    return (time.perf_counter() - start) / runs * 1e6, cpu / runs * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--runs", type=int, default=400)
    parser.add_argument("--child-pages", type=int, default=299)
    parser.add_argument("--supervisor-pages", type=int, default=268)
    args = parser.parse_args()
    results: dict[str, list[tuple[float, float]]] = {"zygote": [], "server": []}
    for _ in range(args.repeats):  # interleaved: the machine's noise hits both alike
        for mode in results:
            results[mode].append(run(mode, args.runs, args.child_pages, args.supervisor_pages))
    print("| fork from | wall µs per run | CPU µs per run |")
    print("|---|---|---|")
    for mode, rows in results.items():
        wall = statistics.median(r[0] for r in rows)
        cpu = statistics.median(r[1] for r in rows)
        print(f"| {mode} | {wall:.0f} | {cpu:.0f} |")
    ratio = statistics.median(r[1] for r in results["zygote"]) / statistics.median(r[1] for r in results["server"])
    print(f"CPU per run, zygote / fork server: {ratio:.2f}x")


if __name__ == "__main__":
    main()
