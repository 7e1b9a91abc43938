"""Runs inside the sandbox for ``bench/grading.py``: each HumanEval reference and its check, one after
another in this one process (no process per grade, no harness, no host), three times over; prints
each task's median CPU milliseconds as a JSON object (the thread's clock: with RLIMIT_CPU set, the
process's clock advances only at each scheduler tick). What is left of a grade's cost once every
per-grade cost is gone: the work of the reference and its check themselves, warm (the median of
the passes: without the first-time imports and cold caches of a grade's fresh process).

Reads ``[[task id, reference, check, entry point], ...]`` as JSON on stdin.
"""

import json
import statistics
import sys
import time
from typing import Any

PASSES = 3


def main() -> None:
    jobs = json.load(sys.stdin)
    times: dict[str, list[float]] = {}
    for _ in range(PASSES):
        for task_id, reference, check, entry_point in jobs:
            namespace: dict[str, Any] = {"__name__": "__main__"}
            start = time.thread_time()
            exec(compile(reference, "reference.py", "exec"), namespace)
            exec(compile(check, "check.py", "exec"), namespace)
            namespace["check"](namespace[entry_point])
            times.setdefault(task_id, []).append((time.thread_time() - start) * 1000)
    print(json.dumps({task_id: statistics.median(ms) for task_id, ms in times.items()}))


if __name__ == "__main__":
    main()
