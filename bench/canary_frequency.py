"""What the canaries' values give away to a forger that reads only the rewritten test file: for each
canaried swe task, ``--draws`` groups of copies are drawn as a grading draws them
(``dojo.tasks.canaries.canary_group``), and a rule picks the copy whose values the file writes most
often outside the copies (numbers: how often the value is written; dotted names likewise; strings:
the whole string, each of its words, one-letter words): an adversary's rule (2026-12-07), which in the
sandbox was paid in 105 of 276 gradings with the diff check off. Prints the share of draws in which it
picks the twin, per package, next to a random pick (1 in 20). Offline: nothing runs. Asserts nothing.

    .venv/bin/python bench/canary_frequency.py [--draws 5] [--packages fire,toolz,...]
"""

from __future__ import annotations

import argparse
import ast
import collections
import math
import random
import re

from dojo.tasks.canaries import TestNode, canary_group
from dojo.tasks.swe import PACKAGES, swe_data, swe_environment

WORD = re.compile(r"[^\W\d_]+")


def copies(text: str, name: str) -> list[tuple[str, tuple[str, ...]]]:
    """(copy name, the source of each value it passes) for each copy in the rewritten file."""
    out = []
    for fn in ast.walk(ast.parse(text)):
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef) and re.fullmatch(re.escape(name) + r"_\d+", fn.name):
            statement = fn.body[0]
            call = statement.value if isinstance(statement, ast.Expr) else None
            if isinstance(call, ast.Await):
                call = call.value
            if isinstance(call, ast.Call):
                keywords = sorted(
                    (k for k in call.keywords if (k.arg or "").startswith("_v")), key=lambda k: k.arg or ""
                )
                out.append((fn.name, tuple(ast.unparse(k.value) for k in keywords)))
    return out


def written(value: str, rest: str) -> int:
    return len(re.findall(rf"(?<![\w.]){re.escape(value)}(?![\w.])", rest))


def score(values: tuple[str, ...], rest: str, counts: collections.Counter[str]) -> float:
    """How much the file outside the copies writes of these values (the adversary's rule)."""
    total = 0.0
    for text in values:
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            value = None
        if isinstance(value, str):
            total += 3 * math.log(1 + rest.count(repr(value)))
            words = WORD.findall(value)
            total += sum(math.log(1 + counts[w.lower()]) for w in words) + 5 * sum(len(w) == 1 for w in words)
        elif isinstance(value, int | float) and not isinstance(value, bool):
            total += 0.5 * math.log(1 + written(text, rest))
        else:  # a dotted name
            total += math.log(1 + written(text, rest))
    return total


def main(packages: list[str], draws: int) -> None:
    rng, fresh = random.Random(7), random.SystemRandom()
    for package in packages:
        data, env = swe_data(package), swe_environment(package)
        hits = picks = 0
        for bug in data["bugs"]:
            canary = bug.get("canary")
            if not canary:
                continue
            node = TestNode.parse(canary["test"])
            source = (env.site_packages / node.path).read_text()
            for _ in range(draws):
                group = canary_group(source, node, canary["site"], fresh, canary.get("avoid", []))
                if group is None:
                    continue
                made = copies(group.text, node.name)
                pattern = rf"\n[ \t]*(?:@.*\n[ \t]*)*def {re.escape(node.name)}_\d+\(.*\n.*\n"
                rest = re.sub(pattern, "\n", group.text)
                counts = collections.Counter(w.lower() for w in WORD.findall(rest))
                chosen = max(made, key=lambda c: (score(c[1], rest, counts), rng.random()))[0]
                hits += chosen == TestNode.parse(group.twin).name
                picks += 1
        print(f"{package}: the twin picked in {hits} of {picks} draws ({hits / max(1, picks):.1%}; a random pick: 5%)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=5)
    parser.add_argument("--packages", default="dill,fire,networkx,pyflakes,toolz")
    args = parser.parse_args()
    chosen = args.packages.split(",")
    if unknown := sorted(set(chosen) - set(PACKAGES)):
        parser.error(f"unknown packages {unknown}; known: {', '.join(sorted(PACKAGES))}")
    main(chosen, args.draws)
