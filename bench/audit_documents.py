"""Audit time and verdicts of task sources: `python bench/audit_documents.py [--n N] [SOURCE ...]`.

Loads each source (``family:documents``, ``ifbench?all=1``, ...; a ``family:`` source without ``n=``
gets ``--n`` tasks, default 1,000, seed 0, difficulties spread over 0..1) and audits it with the
audit's defaults (the reference twice, the trivial candidates once: the empty reply, the prompt
echoed, a claim, the headings only, an empty report, a report of zeros, no call, objects at the
origin, as each form has them) on a sandbox pool of two slots. Prints, per source, the generation
and audit wall times, the references' pass rate, how many trivial candidates passed, the verifiable
count, the problems and the near-duplicate prompts. Without sources: the document sources
(``family:documents``, ``family:office``, ``ifbench?all=1``) and ``family:doc_analysis`` and
``family:scene3d``.
"""

from __future__ import annotations

import argparse
import asyncio
import time

from dojo.rewards.audit import audit_tasks
from dojo.sandbox import AsyncSandbox
from dojo.tasks import load_source

DEFAULT_SOURCES = ("family:documents", "family:office", "ifbench?all=1", "family:doc_analysis", "family:scene3d")


def with_size(source: str, n: int) -> str:
    """A ``family:`` source with ``n=`` set when it has none; other sources as given."""
    if not source.startswith("family:") or "n=" in source.partition("?")[2]:
        return source
    return f"{source}{'&' if '?' in source else '?'}n={n}"


async def main(sources: list[str], n: int) -> None:
    async with AsyncSandbox(pool_size=2) as sandbox:
        for source in (with_size(s, n) for s in sources):
            start = time.perf_counter()
            tasks = load_source(source)
            generated = time.perf_counter() - start
            start = time.perf_counter()
            report = await audit_tasks(tasks, sandbox)
            seconds = time.perf_counter() - start
            passed = sum(all(v == 1.0 for v in t.reference_rewards) for t in report.tasks if t.reference_rewards)
            with_ref = sum(bool(t.reference_rewards) for t in report.tasks)
            trivial = sum(len(t.trivial_passed) for t in report.tasks)
            summary = report.summary()
            print(
                f"{source}: {len(tasks)} tasks loaded in {generated:.1f} s, audited in {seconds:.1f} s; "
                f"references 1.0 on {passed}/{with_ref} ({100 * passed / max(1, with_ref):.1f}%); trivial passes "
                f"{trivial}; verifiable {summary['verifiable']}; problems {summary['problems']}; near-duplicate "
                f"prompts {summary['near_duplicates']}"
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sources", nargs="*", default=list(DEFAULT_SOURCES), help="task sources to audit")
    parser.add_argument("--n", type=int, default=1000, help="tasks of each family: source without n=")
    args = parser.parse_args()
    asyncio.run(main(args.sources, args.n))
