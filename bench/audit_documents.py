"""Audit time and verdicts of the document sources: `python bench/audit_documents.py [N]`.

Audits N (default 1,000) tasks of family:documents and of family:office, and every ifbench task,
with the audit's defaults (the reference twice, the trivial candidates once), on a sandbox pool of
two slots; prints the wall time, the references' pass rate and what the trivial candidates earned.
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
        for source in (f"family:documents?n={n}", f"family:office?n={n}", "ifbench?all=1"):
            tasks = load_source(source)
            start = time.perf_counter()
            report = await audit_tasks(tasks, sandbox)
            seconds = time.perf_counter() - start
            passed = sum(all(v == 1.0 for v in t.reference_rewards) for t in report.tasks if t.reference_rewards)
            with_ref = sum(bool(t.reference_rewards) for t in report.tasks)
            summary = report.summary()
            print(
                f"{source}: {len(tasks)} tasks audited in {seconds:.1f} s; references 1.0 on {passed}/{with_ref}; "
                f"verifiable {summary['verifiable']}; problems {summary['problems']}"
            )


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 1000))
