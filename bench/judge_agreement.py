"""The spot-check targets of issue #37: ``python bench/judge_agreement.py [--items 1000] [--rate 0.15]``.

1. A scripted judge served on 127.0.0.1 flips ``--rate`` of its verdicts at random; it grades
   ``--items`` texts whose truth is known, the episodes go to a trajectory store, ``dojo judge
   sample --rate 1`` draws them, and ``dojo judge agreement`` compares them with the truth as labels:
   the disagreement it reports should be the flip rate (within 3 points on 1,000 items).
2. A judge that always prefers the first answer compares ``--items`` pairs: the share caught as a
   position flip (both orders asked) should be at least 95%.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.rewards.spot_check_run import flipped_agreement, position_flips


async def main(items: int, rate: float, seed: int) -> None:
    with tempfile.TemporaryDirectory(prefix="dojo-judge-agreement-") as tmp:
        result = await flipped_agreement(Path(tmp), items, rate, seed)
    d = result["disagreement"]
    print(f"flipping judge ({rate:.0%} of verdicts flipped at random), {result['items']} items:")
    print(
        f"  dojo judge agreement: accuracy {result['accuracy']:.3f}, disagreement {d:.3f} "
        f"(off by {abs(d - rate) * 100:.1f} points), Cohen's kappa {result['cohen_kappa']:.3f}"
    )
    print(f"  confusion (judge -> people): {result['confusion']}")
    caught = await position_flips(items)
    print(f"judge that always prefers the first answer, {items} pairs: {caught:.1%} caught as position flips")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=0.15)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    asyncio.run(main(args.items, args.rate, args.seed))
