"""Prompt injection against a judge, measured: ``python bench/judge_injection.py``.

Serves a scripted judge on 127.0.0.1 that obeys any instruction it reads outside the quoted text
(``tests/rewards/judge_server.py``'s ``ObeyingJudge``) and grades the injection corpus
(``tests/rewards/judge_injections.py``) under each set of defences: how many texts raise their rubric
score, how many make a poor answer win a comparison, and how many detection alone catches; and how
many of the honest texts that quote verdict-like JSON (``HONEST``) score below the same answer
without it (a false detection zeroes them).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.rewards.judge_injections import CORPUS, HONEST, measure
from tests.rewards.judge_server import ObeyingJudge, serve_judge

MODES = [
    ("nothing (text pasted in, no detection)", "none", False),
    ("fixed fence (triple quotes)", "fixed", False),
    ("nonce fence", "nonce", False),
    ("detection alone (no fence)", "none", True),
    ("defences on (nonce fence + detection)", "nonce", True),
]


async def main() -> None:
    n = len(CORPUS)
    print(f"injection corpus: {n} texts; a judge that obeys what it reads outside the quotation\n")
    h = len(HONEST)
    print(f"{'defences':<42} {'rubric raised':>14} {'pairwise won':>13} {'honest lowered':>15}")
    detected: list[str] = []
    flagged: list[str] = []
    async with serve_judge(ObeyingJudge()) as url:
        for label, fence, detect in MODES:
            m = await measure(url, fence, detect)  # type: ignore[arg-type]
            print(
                f"{label:<42} {len(m.raised_rubric):>9} of {n} {len(m.raised_pairwise):>8} of {n} "
                f"{len(m.honest_lowered):>9} of {h}"
            )
            detected, flagged = m.detected, m.honest_flagged
    missed = [i.name for i in CORPUS if i.name not in detected]
    print(f"\ncaught by detection alone: {len(detected)} of {n}; missed: {', '.join(missed)}")
    print(f"honest texts flagged as a hack: {len(flagged)} of {h}: {', '.join(flagged) or '-'}")


if __name__ == "__main__":
    asyncio.run(main())
