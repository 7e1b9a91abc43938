"""The counting forger: a twin that the test file writes more (or less) than its canaries is found by
counting, and such a site is reported (and, at mining, not chosen)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from dojo.rewards.audit import forge_odds
from dojo.tasks.canaries import COPIES, TestNode, canary_group
from dojo.tasks.canary_counting import (
    COUNTING_ODDS_MAX,
    RULE_NAMES,
    counting_odds,
    counting_ranks,
    counting_score,
    forger_ranks,
    forger_shares,
)
from dojo.tasks.canary_package import PackageText, Phrases, expected_numbers, package_phrases, package_text, word_pairs
from dojo.tasks.model import Canary, Task, TestCase, Workspace

TESTS = """\
from pkg import f, g

LIMIT = 107
AROUND = [39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57,
          59, 60, 61, 62, 63, 64, 65, 66, 67, 68, 69, 70, 71, 72, 73, 74, 75, 76, 77]


def test_written_elsewhere():
    assert f(1) == 107


def test_other():
    assert g(107) == 3
    assert g(107, 107) == 107


def test_written_once():
    assert f(2) == 5008


def test_written_least():
    assert f(3) == 58


def test_zero():
    assert f(9) == 0


def test_join():
    assert f(["rice", "beans"]) == "rice beans"
"""
PATH = "pkg/tests/test_f.py"


def node(name: str) -> TestNode:
    return TestNode.parse(f"{PATH}::{name}")


def test_a_twin_the_file_writes_elsewhere_is_what_counting_picks() -> None:
    """``107`` is written five times besides the site, no other number of its window at all: the
    twin is the most written copy in every draw. ``5008`` is written nowhere else: every copy ties,
    1 in 20 at any rank (within the noise of 400 draws)."""
    assert counting_odds(TESTS, node("test_written_elsewhere"), 0) == 1.0
    assert (counting_odds(TESTS, node("test_written_once"), 0, draws=400) or 1.0) < COUNTING_ODDS_MAX
    assert counting_odds(TESTS, node("test_written_once"), 5) is None  # (no such site)


def test_a_twin_written_least_is_found_too() -> None:
    """Every number of ``58``'s window is written once in ``AROUND``, ``58`` nowhere: a forger that
    picks the least written copy is always right; bounding only the most written missed it."""
    assert counting_odds(TESTS, node("test_written_least"), 0) == 1.0


def test_copies_that_tie_share_their_ranks() -> None:
    group = canary_group(TESTS, node("test_written_once"), 0, random.Random(3))
    assert group is not None
    ranks = counting_ranks(group)
    assert len(ranks) == COPIES and all(r == list(range(COPIES)) for r in ranks.values())


def task(name: str) -> Task:
    return Task(
        id="counted",
        form="repo",
        prompt="fix pkg",
        tests=[TestCase(code=f"{PATH}::{name}", visible=True, canary=Canary(site=0))],
        workspace=Workspace(files={"pkg/__init__.py": "", "pkg/tests/__init__.py": "", PATH: TESTS}),
    )


def test_the_audit_counts_what_counting_pays() -> None:
    """``forge_odds``: what a forger expects that picks each group's copy at random or by counting,
    whichever pays more; the site the file writes elsewhere is above the mining's bound."""
    assert (forge_odds(task("test_written_once")) or 1.0) < COUNTING_ODDS_MAX
    for name in ("test_written_elsewhere", "test_written_least"):
        counted = forge_odds(task(name))
        assert counted is not None and counted > COUNTING_ODDS_MAX and counted == 1.0


def test_a_test_whose_def_is_followed_by_a_comment_is_counted_without_its_copies() -> None:
    """The copies were cut out of the file by a pattern of two-line copies; a copy that keeps the
    test's comment is three lines, and all twenty calls stayed in what was counted (a review,
    2026-12-07: 10 of the 237 swe tasks, their odds understated)."""
    source = TESTS + "\n\ndef test_commented():\n    # the answer\n    assert f(4) == 107\n"
    group = canary_group(source, node("test_commented"), 0, random.Random(2))
    assert group is not None and "_v0=" not in group.outside and "test_commented_" not in group.outside
    assert counting_odds(source, node("test_commented"), 0) == 1.0


def test_a_string_is_counted_in_either_quotes() -> None:
    double, single = 'x = "rice"\ny = "rice"\n', "x = 'rice'\ny = 'rice'\n"
    assert counting_score(["'rice'"], double) == counting_score(["'rice'"], single) > counting_score(["'rice'"], "")


def test_the_tests_own_body_and_a_prior_on_numbers_are_counted_too() -> None:
    """An adversary's rules beyond the file's counts (2026-12-07): ``0`` is the smallest non-negative
    copy of its window in every draw, whatever the file writes; the words of ``'rice beans'`` are the
    test's own input."""
    assert counting_odds(TESTS, node("test_zero"), 0) == 1.0
    assert (counting_odds(TESTS, node("test_join"), 0) or 0.0) > 4 / COPIES


OTHER_TESTS = """\
import unittest
from pkg import g, h


def test_sizes():
    assert len(g(1)) == 6
    assert g(2) == 6 and h() == 7
    assert 6 == h(2)


class TestH(unittest.TestCase):
    def test_h(self):
        self.assertEqual(h(-1), 6)
        self.assertNotEqual(h(4), 9)
        self.assertEqual(h(5), -2)
"""
POPULAR = TESTS + "\n\ndef test_popular():\n    assert f(11) == 6\n"


def test_the_numbers_a_package_expects_are_counted_in_its_comparisons() -> None:
    """Either side of ``==`` and an ``...Equal`` call's arguments, every number within them; not
    ``assertNotEqual``'s, nor a number outside a comparison."""
    counts = expected_numbers([OTHER_TESTS, "x = [3, 3, 3]\n", "this is not Python ("])
    assert counts == {1: 1, 6: 4, 2: 2, 7: 1, -1: 1, 5: 1, -2: 1}


def test_a_twin_the_package_expects_most_is_what_its_prior_picks(tmp_path: Path) -> None:
    """``6`` is what the package's other tests expect most: a forger that ranks the copies by the
    package's expected numbers finds the twin in every draw, where without them (the small numbers
    first) a copy ranked first is the twin in 1 of 20 draws; the scored file itself is left out
    (the forger counts its copies in the rewritten file)."""
    (tmp_path / "pkg" / "tests").mkdir(parents=True)
    (tmp_path / "pkg" / "tests" / "test_other.py").write_text(OTHER_TESTS * 3)
    (tmp_path / PATH).write_text(POPULAR + "\n\ndef test_more():\n    assert f(8) == 4\n" * 40)
    seen = package_text(tmp_path, "pkg", PATH)
    assert seen.numbers[6] == 12 and 4 not in seen.numbers
    assert counting_odds(POPULAR, node("test_popular"), 0, package=seen) == 1.0
    assert (counting_odds(POPULAR, node("test_popular"), 0, draws=200) or 1.0) < 0.5


def _other_files(package: Path, leave_out: Path) -> str:
    return "\n".join(p.read_text() for p in sorted(package.rglob("*.py")) if p != leave_out)


def test_the_audit_reads_the_package_where_the_run_can(monkeypatch: pytest.MonkeyPatch) -> None:
    """``forge_odds`` of a swe task counts what its installed package writes, without the scored
    test's own file; a grading's draw reads the package's phrases the same way (its strings keep
    them): a pair only the left-out file writes is none of them."""
    from dojo.rewards import audit, repo
    from dojo.sandbox.environment import EnvironmentStore
    from dojo.tasks import load_source

    task = next(t for t in load_source("swe:toolz") if any(c.canary for c in t.tests))
    scored = next(c for c in task.tests if c.canary)
    asked: list[tuple[Path, str, str]] = []

    def spy(site: Path, package: str, leave_out: str = "") -> PackageText:
        asked.append((site, package, leave_out))
        return package_text(site, package, leave_out)

    monkeypatch.setattr(repo, "package_text", spy)
    assert audit.forge_odds(task) is not None
    site = EnvironmentStore().get(task.environment or "").site_packages
    path = (scored.code or "").split("::")[0]
    assert asked and set(asked) == {(site, "toolz", path)}
    drawn: list[tuple[Path, str, str]] = []

    def phrases(site: Path, package: str, leave_out: str = "") -> Phrases:
        drawn.append((site, package, leave_out))
        return package_phrases(site, package, leave_out)

    monkeypatch.setattr(repo, "package_phrases", phrases)
    assert repo.plan_canaries(task, random.Random(0)).groups
    assert drawn == [(site, "toolz", path)]
    held = package_phrases(site, "toolz", path)
    own = word_pairs((site / path).read_text())
    assert any(pair in package_phrases(site, "toolz") for pair in own)
    assert not any(pair in held for pair in own - word_pairs(_other_files(site / "toolz", site / path)))


BODY_TESTS = '''\
"""Spares: rice mice dice nice vice lice price bean beam beat seat heat means deans jeans leans."""
from pkg import wrapped


def test_wrapped():
    assert wrapped(["rice", "beans", "chicken", "cheese"], width=15) == "rice | beans |"
'''


def test_the_words_the_test_writes_do_not_tell_the_twin() -> None:
    """``'rice | beans |'``'s words are the test's input: canaries that changed them to other words
    of the file left the twin the copy whose words the test writes most (an adversary's rule,
    2026-12-07). A word the test writes becomes another the test writes, so the copies tie."""
    shares = forger_shares(BODY_TESTS, node("test_wrapped"), 0, draws=200)
    assert shares is not None
    body = RULE_NAMES.index("test body")
    (most, least) = shares
    assert most[body][0] < 2 / COPIES and least[body][0] < 2 / COPIES, (most[body], least[body])


PHRASE_TESTS = '''\
"""Spares: stdin stdout stderr input output sample example reading writing parsing loading saving
problem printing files lines bytes chars decoding words texts items nodes source paths names codes."""
from pkg import check


def test_decoding():
    assert check(b"\\xff") == "<stdin>: problem decoding source"
'''


def test_a_phrase_the_package_writes_is_kept_in_every_copy() -> None:
    """The package's code writes ``"problem decoding source"`` (what it prints): canaries that changed
    a word of it left the twin the one copy whose phrase the package writes (an adversary's rule,
    2026-12-07: 55.6% of string sites' draws). Drawn with the package's phrases, every copy keeps
    it, and that rule ties."""
    seen = PackageText(phrases=word_pairs('raise Problem(f"{name}: problem decoding source")'))
    phrases = RULE_NAMES.index("package's phrases")
    told = 0
    for seed in range(100):
        group = canary_group(PHRASE_TESTS, node("test_decoding"), 0, random.Random(seed))
        assert group is not None
        told += forger_ranks(group, seen)[phrases][TestNode.parse(group.twin).name] == [0]
    assert told > 50  # (drawn without them: the twin alone keeps the phrase in most draws)
    shares = forger_shares(PHRASE_TESTS, node("test_decoding"), 0, draws=100, package=seen)
    assert shares is not None and shares[0][phrases][0] <= 1 / COPIES + 1e-9
