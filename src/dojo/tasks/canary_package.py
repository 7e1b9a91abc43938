"""What a forger of a repo task's report reads in the installed package besides the rewritten test
file (``dojo.tasks.canaries``): the numbers its tests expect, and the phrases it writes. Adversaries
(2026-12-07) ranked the copies by both: the numbers the package's other tests compare with found the
twin first in 24.7% of integer sites' draws; the copy whose string's phrase the package writes
(the code that prints ``'problem decoding source'``, where a canary wrote ``'problem dead source'``)
in 55.6% of string sites' draws. ``dojo.tasks.canary_counting`` measures both rules; a string's
canaries change first the words that make no phrase the package writes (``canary_strings``).
"""

from __future__ import annotations

import ast
import collections
import functools
import itertools
import re
from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

_EQUALITY_CALL = re.compile(r"equal", re.IGNORECASE)  # assertEqual, assert_equal, assertAlmostEqual, ...


def _number(node: ast.expr) -> int | float | None:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _number(node.operand)
        return None if inner is None else -inner
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
        return node.value
    return None


def expected_numbers(texts: Iterable[str]) -> dict[int | float, int]:
    """How often ``texts`` (a package's files, as a run can read them) write each number in what a
    test compares for equality: either side of ``==`` and the arguments of an ``...equal(...)``
    call (``assertEqual``, ``assert_equal``), every number within them. A forger's prior on what a
    test expects (an adversary's, 2026-12-07: the twin first in 24.7% of integer sites' draws)."""
    counts: collections.Counter[int | float] = collections.Counter()
    for text in texts:
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            sides: list[ast.expr] = []
            if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.Eq):
                sides = [node.left, *node.comparators]
            elif isinstance(node, ast.Call):
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if _EQUALITY_CALL.search(name) and "not" not in name.lower():
                    sides = list(node.args[:2])
            for side in sides:
                signed = {id(p.operand) for p in ast.walk(side) if isinstance(p, ast.UnaryOp)}  # (-1 is not 1 too)
                for part in ast.walk(side):
                    if isinstance(part, ast.expr) and id(part) not in signed and (value := _number(part)) is not None:
                        counts[value] += 1
    return dict(counts)


_WORD = re.compile(r"[^\W\d_]+")


def word_pairs(text: str) -> frozenset[str]:
    """Each two words ``text`` writes one after the other (``"problem decoding"``), lower case: what
    a phrase of it can be looked up by."""
    words = [w.lower() for w in _WORD.findall(text)]
    return frozenset(f"{a} {b}" for a, b in itertools.pairwise(words))


@functools.lru_cache(maxsize=4096)
def _file_numbers(path: str, mtime_ns: int) -> dict[int | float, int]:
    with open(path, encoding="utf-8", errors="replace") as f:
        return expected_numbers([f.read()])


@functools.lru_cache(maxsize=4096)
def _file_pairs(path: str, mtime_ns: int) -> frozenset[str]:
    with open(path, encoding="utf-8", errors="replace") as f:
        return word_pairs(f.read())


def _files(site_packages: Path, package: str, leave_out: str) -> list[tuple[str, int]]:
    found = sorted((site_packages / package).rglob("*.py"))
    return [(str(p), p.stat().st_mtime_ns) for p in found if p.relative_to(site_packages).as_posix() != leave_out]


@dataclass(frozen=True, eq=False)
class Phrases:
    """The pairs of words a package's files write (``word_pairs``), but one file's (``left``):
    looked up with ``in``. One count a package (how many of its files write each pair) serves every
    file left out: a set a file had held networkx's ~140,000 pairs for each of its 41 canaried
    test files, ~170 MB a process (a review, 2026-12-07)."""

    counts: Mapping[str, int] = field(default_factory=dict)
    left: frozenset[str] = frozenset()

    def __contains__(self, pair: object) -> bool:
        return isinstance(pair, str) and self.counts.get(pair, 0) - (pair in self.left) > 0


@functools.lru_cache(maxsize=32)
def _pair_counts(site_packages: Path, package: str) -> dict[str, int]:
    counts: collections.Counter[str] = collections.Counter()
    for path, stamp in _files(site_packages, package, ""):
        counts.update(_file_pairs(path, stamp))
    return dict(counts)


def package_phrases(site_packages: Path, package: str, leave_out: str = "") -> Phrases:
    """The pairs of words the installed ``package``'s Python files write (what a run can read), but
    ``leave_out`` (a path under ``site_packages``: the scored test's file, which a forger reads
    rewritten). The counts are kept per package: an environment's files do not change once it is
    made (networkx's: ~1 s once)."""
    left = site_packages / leave_out
    held = leave_out and left.is_file() and left.is_relative_to(site_packages / package)
    pairs = _file_pairs(str(left), left.stat().st_mtime_ns) if held else frozenset()
    return Phrases(_pair_counts(site_packages, package), pairs)


@dataclass(frozen=True)
class PackageText:
    """What a forger reads in the package besides the rewritten test file: the numbers its tests
    expect (``expected_numbers``) and the pairs of words it writes (``word_pairs``)."""

    numbers: Mapping[int | float, int] = field(default_factory=dict)
    phrases: Container[str] = frozenset()


@functools.lru_cache(maxsize=256)
def package_text(site_packages: Path, package: str, leave_out: str = "") -> PackageText:
    """``PackageText`` of the installed ``package``'s Python files, but ``leave_out`` (see
    ``package_phrases``); kept per package and file left out, as an environment's files do not
    change (each file's parse is kept per modification time too)."""
    counts: collections.Counter[int | float] = collections.Counter()
    for path, stamp in _files(site_packages, package, leave_out):
        counts.update(_file_numbers(path, stamp))
    return PackageText(dict(counts), package_phrases(site_packages, package, leave_out))
