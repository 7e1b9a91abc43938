"""Audit time and verdicts of family:doc_analysis and family:scene3d: `python bench/audit_doc_scene.py [N]`.

Generates N (default 1,000) tasks of each family (seed 0, difficulties spread over 0..1), audits them
with the audit's defaults (the reference twice, the trivial candidates once: an empty report, a report
of zeros, the question echoed, a claim; no call, objects at the origin) on a sandbox pool of two
slots, and prints the generation and audit wall times, the references' pass rate and what the trivial
candidates earned.
"""

from __future__ import annotations

import asyncio
import sys
import time

from dojo.rewards.audit import audit_tasks
from dojo.sandbox import AsyncSandbox
from dojo.tasks import load_source


async def main(n: int) -> None:
    async with AsyncSandbox(pool_size=2) as sandbox:
        for family in ("doc_analysis", "scene3d"):
            start = time.perf_counter()
            tasks = load_source(f"family:{family}?n={n}")
            generated = time.perf_counter() - start
            start = time.perf_counter()
            report = await audit_tasks(tasks, sandbox)
            seconds = time.perf_counter() - start
            passed = sum(all(v == 1.0 for v in t.reference_rewards) for t in report.tasks if t.reference_rewards)
            trivial = sum(len(t.trivial_passed) for t in report.tasks)
            summary = report.summary()
            print(
                f"family:{family}: {len(tasks)} tasks generated in {generated:.1f} s, audited in {seconds:.1f} s; "
                f"references 1.0 on {passed}/{len(tasks)} ({100 * passed / len(tasks):.1f}%); trivial passes "
                f"{trivial}; verifiable {summary['verifiable']}; problems {summary['problems']}; near-duplicate "
                f"prompts {summary['near_duplicates']}"
            )


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 1000))
