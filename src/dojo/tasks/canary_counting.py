"""The counting forger: what a test file's other text gives away about which canary copy is the twin.

A forger that reads the rewritten test file and never runs anything can still rank the copies
(``dojo.tasks.canaries``): the twin's values are the author's, and authors write the same values
again (``0``, ``1``, the test's own input, ``m.UndefinedName`` 33 times in one pyflakes file),
where a window's other numbers and the file's rarer names are written less. An adversary's rule
(2026-12-07), ``counting_score``: the copy whose values the file writes most often outside the
copies; in the sandbox, with the diff check off, it was paid in 105 of 276 gradings. Measured over
every canaried swe task (``bench/canary_frequency.py``, 10 draws each): integer sites gave it the
twin in 38% of draws on average (58 of 162 sites in 9 draws of 10 or more), pyflakes's pairs of
dotted names 42%, decimal sites 100%, string sites 7%.

``counting_odds`` measures, for one site, what the best forger that ranks the copies by that score,
by how much the test's own body writes of each copy's values (``body_score``) or by a prior on
expected numbers (``prior_score``: small, non-negative; two rules of a later adversary's, which
with the package's test files and a combination got the twin in 27% of draws), or by how often the
package's files expect each number (``package_score``: that adversary's strongest rule on integer
sites, the twin first in 24.7% of draws, as the package's authors expect ``1`` to ``4`` most), or
how many of each string's pairs of words the package writes (``phrase_score``: a later adversary's,
55.6% of string sites' draws; ``dojo.tasks.canary_package``), and picks among the few first, or the
few last, expects over drawn groups. Mining
(``dojo.rewards.bug_mining.choose_canaries``) prefers a site within ``COUNTING_ODDS_MAX`` of a
bug's sites (twice a random pick's ``1 / COPIES``), and keeps one above it only where no other
holds; the audit reports every task's figure (``forge_odds``, warning ``counted_twin``).
"""

from __future__ import annotations

import ast
import collections
import functools
import math
import random
import re
from collections.abc import Callable, Container, Mapping, Sequence

from dojo.tasks.canaries import COPIES, CanaryGroup, TestNode, Value, canary_group
from dojo.tasks.canary_package import PackageText, word_pairs
from dojo.tasks.canary_strings import PART

WORD = re.compile(r"[^\W\d_]+")
# The most a site's counting odds may be for it to be canaried: twice a random pick's.
COUNTING_ODDS_MAX = 2 / COPIES
COUNTING_DRAWS = 60  # (a fair site reads above the bound by chance in ~6% of sites at 60 draws)
TOP = (1, 2, 3, 5)  # a forger picks among the k most (or least) written copies


@functools.lru_cache(maxsize=4096)
def _written(value: str, rest: str) -> int:
    return len(re.findall(rf"(?<![\w.]){re.escape(value)}(?![\w.])", rest))


@functools.lru_cache(maxsize=64)
def _word_counts(rest: str) -> collections.Counter[str]:
    return collections.Counter(w.lower() for w in WORD.findall(rest))


def _quoted(value: str) -> tuple[str, ...]:
    """A string as a file may write it: in single quotes (``repr``) or in double quotes."""
    single = repr(value)
    double = '"' + single[1:-1].replace('"', '\\"').replace("\\'", "'") + '"' if single[0] == "'" else single
    return tuple(dict.fromkeys([single, double]))


def counting_score(values: Sequence[str], rest: str) -> float:
    """How much ``rest`` writes of a copy's values (their source texts): the adversary's rule.
    Numbers by how often their text is written, dotted names likewise, strings by the whole string
    (in either quotes), each of its words and its one-letter words."""
    counts = _word_counts(rest)
    total = 0.0
    for text in values:
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            value = None
        if isinstance(value, str):
            total += 3 * math.log(1 + sum(rest.count(q) for q in _quoted(value)))
            words = WORD.findall(value)
            total += sum(math.log(1 + counts[w.lower()]) for w in words) + 5 * sum(len(w) == 1 for w in words)
        elif isinstance(value, int | float) and not isinstance(value, bool):
            total += 0.5 * math.log(1 + _written(text, rest))
        else:  # a dotted name
            total += math.log(1 + _written(text, rest))
    return total


@functools.lru_cache(maxsize=64)
def _part_counts(text: str) -> collections.Counter[str]:
    return collections.Counter(p.lower() for p in PART.findall(text))


def body_score(values: Sequence[str], body: str) -> float:
    """How much the test's own body (its inputs, its other assertions, its name) writes of a copy's
    values, part by part (words, CamelCase parts of a name, digit runs): an adversary's rule
    (2026-12-07) that found fire's ``'rice | beans |'`` in ``WrappedJoin(['rice', 'beans', ...])``,
    ``'beaker.py:10'`` in ``lineno=10`` and pyflakes's ``m.ImportStarUsed`` in the body's other
    ``flakes(...)`` lines."""
    counts = _part_counts(body)
    return sum(math.log(1 + counts[p.lower()]) for text in values for p in PART.findall(text))


def prior_score(values: Sequence[str]) -> float:
    """How likely a copy's numbers are as a test's expected values by a prior an adversary used
    (2026-12-07): small and non-negative first (``0``, ``1``, ``2`` are most of them); 0 for the rest."""
    total = 0.0
    for text in values:
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            continue
        if isinstance(value, int | float) and not isinstance(value, bool):
            total -= abs(value) + (1000 if value < 0 else 0)
    return total


def phrase_score(values: Sequence[str], phrases: Container[str]) -> float:
    """How many of the pairs of words of a copy's strings the package writes (``word_pairs``): an
    adversary's rule (2026-12-07) on string sites, the twin first in 55.6% of draws, where a canary
    had changed a word of a phrase the package's code writes."""
    total = 0.0
    for text in values:
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            continue
        if isinstance(value, str):
            total += sum(pair in phrases for pair in word_pairs(value))
    return total


def package_score(values: Sequence[str], expected: Mapping[int | float, int]) -> float:
    """How likely a copy's numbers are by how often the package's files expect each
    (``expected_numbers``), the non-negative and the smaller first among equals; 0 for the rest."""
    total = 0.0
    for text in values:
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            continue
        if isinstance(value, int | float) and not isinstance(value, bool):
            total += math.log(expected.get(value, 0) + 0.1) - 5 * (value < 0) - 1e-3 * abs(value)
    return total


def _ranks(scores: dict[str, float]) -> dict[str, list[int]]:
    """For each copy, the ranks (0: the highest score) it may hold: several where copies tie (a
    forger cannot tell them apart)."""
    return {copy: _ranks_of(score, list(scores.values())) for copy, score in scores.items()}


def _ranks_of(score: float, scores: list[float]) -> list[int]:
    above = sum(other > score + 1e-9 for other in scores)
    tied = sum(abs(other - score) <= 1e-9 for other in scores)
    return list(range(above, above + tied))


# A copy's values (as written), its group, what the package writes -> a score.
Rule = Callable[[Sequence[str], CanaryGroup, PackageText], float]
# The rules a forger that reads the files may rank the copies by: the file's counts, the test body's,
# the prior on numbers, the package's expected numbers, the package's phrases.
RULES: tuple[Rule, ...] = (
    lambda given, group, package: counting_score(given, group.outside),
    lambda given, group, package: body_score(given, group.body),
    lambda given, group, package: prior_score(given),
    lambda given, group, package: package_score(given, package.numbers),
    lambda given, group, package: phrase_score(given, package.phrases),
)
RULE_NAMES = ("file counts", "test body", "small numbers", "package's numbers", "package's phrases")  # (RULES')


def _ranked(group: CanaryGroup, rule: Rule, package: PackageText) -> dict[str, list[int]]:
    names = [TestNode.parse(member).name for member in group.members]
    return _ranks({name: rule(given, group, package) for name, given in zip(names, group.given, strict=True)})


def counting_ranks(group: CanaryGroup) -> dict[str, list[int]]:
    """For each copy of ``group`` (by test name), the ranks (0: the most written) it may hold by
    ``counting_score``, counted in the file outside the copies."""
    return _ranked(group, RULES[0], PackageText())


def forger_ranks(group: CanaryGroup, package: PackageText | None = None) -> list[dict[str, list[int]]]:
    """Each copy's ranks by each of ``RULES`` (``package``: what the package writes, ``package_text``)."""
    return [_ranked(group, rule, package or PackageText()) for rule in RULES]


def forger_shares(
    source: str,
    node: TestNode,
    site: int,
    avoid: Sequence[Value] = (),
    draws: int = COUNTING_DRAWS,
    rng: random.Random | None = None,
    package: PackageText | None = None,
) -> tuple[list[list[float]], list[list[float]]] | None:
    """Over ``draws`` groups of ``node``'s copies at ``site`` drawn as a grading draws them, for each
    of ``RULES`` and each ``k`` of ``TOP``: the share of groups in which the twin is among the ``k``
    copies the rule ranks first, and among the ``k`` it ranks last (a tie of copies across that line
    counts in part). ``package``: what the package writes (``package_text``; its phrases are what the
    canaries' strings keep too, as a grading's do). None when the site makes no group."""
    rng = rng or random.Random(0)
    package = package or PackageText()
    most = [[0.0] * len(TOP) for _ in RULES]
    least = [[0.0] * len(TOP) for _ in RULES]
    made = 0
    for _ in range(draws):
        group = canary_group(source, node, site, rng, avoid, package.phrases)
        if group is None:
            continue
        twin = group.members.index(group.twin)
        for j, rule in enumerate(RULES):  # (the twin's ranks alone: what is counted)
            scores = [rule(given, group, package) for given in group.given]
            ranks = _ranks_of(scores[twin], scores)
            for i, k in enumerate(TOP):
                most[j][i] += sum(r < k for r in ranks) / len(ranks)
                least[j][i] += sum(r >= COPIES - k for r in ranks) / len(ranks)
        made += 1
    if not made:
        return None
    return [[m / made for m in ms] for ms in most], [[n / made for n in ns] for ns in least]


def counting_odds(
    source: str,
    node: TestNode,
    site: int,
    avoid: Sequence[Value] = (),
    draws: int = COUNTING_DRAWS,
    rng: random.Random | None = None,
    package: PackageText | None = None,
) -> float | None:
    """What the best forger that reads the files expects of ``node``'s copies at ``site``: of
    ``forger_shares``, the share in which the twin is among a rule's ``k`` first copies, or its ``k``
    last, divided by ``k`` (it picks one of them at random), the largest for ``k`` in ``TOP`` and any
    rule. A site picked for holding its twin away from the most written had it written least
    (fire's, pyflakes's: 14% and 8% of draws for the least written when only the most written was
    bounded, 2026-12-07). ``package``: what the package writes (without it, the numbers rule ranks by
    sign and size alone and the phrases rule ties). None when the site makes no group."""
    shares = forger_shares(source, node, site, avoid, draws, rng, package)
    return None if shares is None else best_odds(shares)


def best_odds(shares: tuple[list[list[float]], list[list[float]]]) -> float:
    """Of ``forger_shares``' figures, what the best of its forgers expects: a rule's share for ``k``
    first or ``k`` last copies divided by ``k``, the largest."""
    most, least = shares
    return max(max(m, n) / k for ms, ns in zip(most, least, strict=True) for m, n, k in zip(ms, ns, TOP, strict=True))
