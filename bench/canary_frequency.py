"""What the canaries' values give away to a forger that reads only the rewritten test file: for each
canaried swe task, ``--draws`` groups of copies are drawn as a grading draws them
(``dojo.tasks.canaries.canary_group``) and ranked by each rule of ``dojo.tasks.canary_counting``:
how often the file writes each copy's values outside the copies (an adversary's rule of
2026-12-07, paid in 105 of 276 sandbox gradings with the diff check off), how often the test's own
body writes their parts, a prior on expected numbers. Prints, per package, the mean over tasks of
what the best of those forgers expects (one that picks among the k first or k last copies by one
rule: ``counting_odds``) next to a random pick (1 in 20), and how many tasks are above
``COUNTING_ODDS_MAX``. Offline: nothing runs. Asserts nothing.

    .venv/bin/python bench/canary_frequency.py [--draws 60] [--packages fire,toolz,...]
"""

from __future__ import annotations

import argparse
import random

from dojo.tasks.canaries import TestNode
from dojo.tasks.canary_counting import COUNTING_ODDS_MAX, counting_odds
from dojo.tasks.swe import PACKAGES, swe_data, swe_environment


def main(packages: list[str], draws: int) -> None:
    fresh = random.SystemRandom()
    for package in packages:
        data, env = swe_data(package), swe_environment(package)
        odds = []
        for bug in data["bugs"]:
            canary = bug.get("canary")
            if not canary:
                continue
            node = TestNode.parse(canary["test"])
            source = (env.site_packages / node.path).read_text()
            found = counting_odds(source, node, canary["site"], canary.get("avoid", []), draws, fresh)
            if found is not None:
                odds.append(found)
        over = sum(o > COUNTING_ODDS_MAX for o in odds)
        print(
            f"{package}: the best forger that reads the file expects {sum(odds) / max(1, len(odds)):.1%} of the "
            f"reward over {len(odds)} canaried tasks ({over} above {COUNTING_ODDS_MAX:.0%}; a random pick: 5%)"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=60)
    parser.add_argument("--packages", default="dill,fire,networkx,pyflakes,toolz")
    args = parser.parse_args()
    chosen = args.packages.split(",")
    if unknown := sorted(set(chosen) - set(PACKAGES)):
        parser.error(f"unknown packages {unknown}; known: {', '.join(sorted(PACKAGES))}")
    main(chosen, args.draws)
