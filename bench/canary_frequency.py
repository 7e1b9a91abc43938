"""What the canaries' values give away to a forger that reads only the rewritten test file: for each
canaried swe task, ``--draws`` groups of copies are drawn as a grading draws them
(``dojo.tasks.canaries.canary_group``) and ranked by each rule of ``dojo.tasks.canary_counting``:
how often the file writes each copy's values outside the copies (an adversary's rule of 2026-12-07,
paid in 105 of 276 sandbox gradings with the diff check off), how often the test's own body writes
their parts, a prior on expected numbers, how often the package's other files expect each number,
how many of each string's pairs of words the package writes. Prints, per package, the mean over
tasks of what the best of those forgers expects (one that picks among the k first or k last copies
by one rule: ``counting_odds``) next to a random pick (1 in 20), how many tasks are above
``COUNTING_ODDS_MAX``, and how often each rule alone ranks the twin first. Offline: nothing runs.
Asserts nothing.

    .venv/bin/python bench/canary_frequency.py [--draws 60] [--packages fire,toolz,...]
"""

from __future__ import annotations

import argparse
import random

from dojo.tasks.canaries import TestNode
from dojo.tasks.canary_counting import COUNTING_ODDS_MAX, RULE_NAMES, best_odds, forger_shares
from dojo.tasks.canary_package import package_text
from dojo.tasks.swe import PACKAGES, swe_data, swe_environment


def firsts(rows: list[list[float]]) -> str:
    """Each rule's mean share of groups in which it ranks the twin first."""
    means = [sum(row[j] for row in rows) / max(1, len(rows)) for j in range(len(RULE_NAMES))]
    return ", ".join(f"{name} first {mean:.1%}" for name, mean in zip(RULE_NAMES, means, strict=True))


def main(packages: list[str], draws: int) -> None:
    fresh = random.SystemRandom()
    every: list[float] = []
    every_first: list[list[float]] = []
    for package in packages:
        data, env = swe_data(package), swe_environment(package)
        odds, first = [], []
        for bug in data["bugs"]:
            canary = bug.get("canary")
            if not canary:
                continue
            node = TestNode.parse(canary["test"])
            source = (env.site_packages / node.path).read_text()
            seen = package_text(env.site_packages, package, node.path)
            shares = forger_shares(source, node, canary["site"], canary.get("avoid", []), draws, fresh, seen)
            if shares is not None:
                odds.append(best_odds(shares))
                first.append([ms[0] for ms in shares[0]])
        over = sum(o > COUNTING_ODDS_MAX for o in odds)
        print(
            f"{package}: the best forger that reads the files expects {sum(odds) / max(1, len(odds)):.1%} of the "
            f"reward over {len(odds)} canaried tasks ({over} above {COUNTING_ODDS_MAX:.0%}; a random pick: 5%); "
            f"{firsts(first)}"
        )
        every += odds
        every_first += first
    over = sum(o > COUNTING_ODDS_MAX for o in every)
    print(f"all: {sum(every) / max(1, len(every)):.1%} over {len(every)} tasks ({over} above); {firsts(every_first)}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=60)
    parser.add_argument("--packages", default="dill,fire,networkx,pyflakes,toolz")
    args = parser.parse_args()
    chosen = args.packages.split(",")
    if unknown := sorted(set(chosen) - set(PACKAGES)):
        parser.error(f"unknown packages {unknown}; known: {', '.join(sorted(PACKAGES))}")
    main(chosen, args.draws)
