"""A string site's canaries (``dojo.tasks.canary_strings``): a forger that runs the bug and picks
the copy most like what the bug computed, or the copy most like all the others, finds the twin no
more often than one picking at random (an adversary's forger was paid on 11 of 20 ``swe:fire``
tasks when the canaries were the file's other strings)."""

from __future__ import annotations

import collections
import difflib
import random
import re

from dojo.tasks.canaries import COPIES
from dojo.tasks.canary_package import Phrases, word_pairs
from dojo.tasks.canary_shown import shown_by_bug
from dojo.tasks.canary_strings import file_words, list_ordinals, string_variants, text_parts

SOURCE = '''
def test_trace(self):
    """Traces record each component the interactive session created, with its file and line."""
    element = trace.FireTraceElement(component="toy", action="created", filename="beaker.py", lineno=10)
    self.assertEqual(str(element), 'Created toy "Beaker" (beaker.py:10)')
    other = trace.FireTrace(initial_component="example", name="mode", separator="error")
    self.assertEqual(other.display(), '1. Initial component\\n2. Entered interactive mode')
    self.assertEqual(formatting.wrapped(["rice", "beans", "chicken", "cheese"], width=15), 'rice | beans |')
'''
WORDS = file_words(SOURCE)
DRAWS = 200
RANDOM_ODDS = 1 / COPIES


def _copies(value: str, avoid: list[str], seed: int) -> list[str]:
    values = [value, *string_variants(value, avoid, WORDS, random.Random(seed), COPIES - 1)]
    assert len(values) == len(set(values)) == COPIES, values
    return values


def _likeness(a: str, b: str) -> float:
    return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()


def _pick(scores: list[float], rng: random.Random) -> int:
    """The index of the best score; ties broken at random (what a forger can do no better than)."""
    best = max(scores)
    return rng.choice([i for i, s in enumerate(scores) if s == best])


def test_the_copy_most_like_the_bugs_string_is_the_twin_no_more_often_than_at_random() -> None:
    """The bug dropped a word (``Created toy (beaker.py:10)``): each canary is the bug's string with a
    word of the file where the test's has ``"Beaker"``, as like the bug's string as the twin is."""
    value, bug = 'Created toy "Beaker" (beaker.py:10)', "Created toy (beaker.py:10)"
    rng, twin = random.Random(0), 0
    for seed in range(DRAWS):
        copies = _copies(value, [bug], seed)
        assert bug not in copies[1:]
        twin += _pick([_likeness(c, bug) for c in copies], rng) == 0
    assert twin / DRAWS < 2 * RANDOM_ODDS, twin
    # where the bug changed a number, the canaries change that number (and nothing the bug left as it
    # is: 9 of them, the rest of a grading's copies are the file's other strings, ``site_values``)
    bug = "-1. Initial component\n0. Entered interactive mode"
    numbered = string_variants("1. Initial component\n2. Entered interactive mode", [bug], WORDS, random.Random(1), 19)
    assert sorted(numbered) == [f"1. Initial component\n{d}. Entered interactive mode" for d in "013456789"]


def test_the_twin_is_not_the_center_of_its_copies_and_every_copy_keeps_the_strings_form() -> None:
    """No string of the bug's to go by: the places that change are drawn for each grading, the same
    for every copy, so no copy is nearer the others than the twin; spaces, punctuation and line
    breaks stay where they are, and a number keeps its number of digits."""
    rng = random.Random(1)
    for value in ("rice | beans |", "1. Initial component\n2. Entered interactive mode"):
        form = re.sub(r"[^\W\d_]+|\d+", "", value)
        twin = 0
        for seed in range(DRAWS):
            copies = _copies(value, [], seed)
            assert all(re.sub(r"[^\W\d_]+|\d+", "", c) == form for c in copies), copies
            assert all(
                [len(n) for n in re.findall(r"\d+", c)] == [len(n) for n in re.findall(r"\d+", value)] for c in copies
            )
            totals = [sum(_likeness(c, o) for o in copies if o is not c) for c in copies]
            twin += _pick(totals, rng) == 0
        assert twin / DRAWS < 2 * RANDOM_ODDS, (value, twin)


def test_the_twin_sits_at_every_likeness_rank_about_equally() -> None:
    """Against a bug's string like the test's, the twin's rank among the copies by likeness to it is
    spread over several ranks: rarely first, and no rank holds it in half the draws (a forger that
    bets on one rank is paid less than one in two)."""
    value, bug = "rice | beans | chicken", "rice | beans | cheese"
    ranks: collections.Counter[int] = collections.Counter()
    for seed in range(DRAWS):
        copies = _copies(value, [bug], seed)
        scores = [_likeness(c, bug) for c in copies]
        ranks[sum(s > scores[0] for s in scores)] += 1
    assert ranks[0] < DRAWS / 10 and max(ranks.values()) < DRAWS / 2, ranks  # no rank that mostly holds the twin


def test_no_canary_expects_the_test_string_or_the_bugs() -> None:
    avoid = ["rice | beans", "rice | beans | cheese", "x"]
    for seed in range(50):
        variants = string_variants("rice | beans | chicken", avoid, WORDS, random.Random(seed), COPIES - 1)
        assert not set(variants) & {"rice | beans | chicken", *avoid}
    assert string_variants("--", [], WORDS, random.Random(0), COPIES - 1) == []  # nothing to change


def test_where_the_bug_changed_a_space_or_a_mark_the_canaries_change_it() -> None:
    """``"{'y':\\n{...}}"`` where ``"{'y': {...}}"`` is expected: the copies differ in that run of space
    only, some of them as near the bug's string as the twin or nearer (a word changed instead left the
    twin the nearest)."""
    value, bug = "{'y': {...}}", "{'y':\n{...}}"
    variants = string_variants(value, [bug], WORDS, random.Random(3), COPIES - 1)
    assert variants and all(v.startswith("{'y':") and v.endswith("{...}}") and v[5:-6].isspace() for v in variants)
    near = _likeness(value, bug)
    assert bug not in variants and max(_likeness(v, bug) for v in variants) >= near  # the twin is not the nearest
    marks = string_variants("a | b", ["a ; b"], WORDS, random.Random(4), COPIES - 1)
    assert len(marks) == COPIES - 1 and all(v[:2] == "a " and v[3:] == " b" for v in marks)


def test_a_word_written_only_in_the_string_is_changed_last() -> None:
    """Every word a canary can take is written somewhere in the file; a word written only in the
    site's string, changed, left the twin the least written copy. Where the string has words the file
    writes elsewhere, those change."""
    source = SOURCE + "\nEXTRA = 'quick brown the'\n"
    words = file_words(source)
    for seed in range(20):
        variants = string_variants("the quick brown fox", [], words, random.Random(seed), COPIES - 1)
        assert variants and all(v.endswith(" fox") for v in variants), variants


def test_a_near_miss_changes_a_word_the_test_writes_when_the_others_give_too_few() -> None:
    """The bug's ``'mice: 5'`` leaves ``rice`` and ``7`` unshown; ``rice`` is the test's input, so it
    changes last, but ``7`` alone gives 9 strings: ``rice`` changes too, and the copies are all of
    the string's shape (the file's other strings, filling in, were told apart; a review, 2026-12-07)."""
    written = text_parts("wrapped(['rice'])")
    variants = string_variants("rice: 7", ["mice: 5"], WORDS, random.Random(0), COPIES - 1, written)
    assert len(variants) == COPIES - 1 and all(re.fullmatch(r"\w+: \d", v) for v in variants), variants
    assert any(not v.startswith("rice") for v in variants)


def test_a_word_of_a_phrase_the_package_writes_becomes_another_word_the_package_writes_there() -> None:
    """The bug's ``'The string ""'`` leaves only ``Test`` unshown, and the package writes ``string
    test`` elsewhere: a copy with another word there made no phrase of the package's, and a forger
    that picked the copy whose words the package writes together found the twin in every draw
    (``swe:fire``, 2026-12-07). Each copy's word now makes a pair the package writes with
    ``string`` too, as many as the file has such words; the rest, as before (a grading whose copies
    were too few had none: 4 in 40 of ``swe:fire/0024``'s, on the way)."""
    package = word_pairs("string test; string trace; string element; string name; string action; string mode")
    phrases = Phrases(collections.Counter(package))
    value, bug = 'The string "Test"', 'The string ""'
    for seed in range(20):
        variants = string_variants(value, [bug], WORDS, random.Random(seed), COPIES - 1, phrases=phrases)
        assert len(variants) == COPIES - 1 and all(v.startswith('The string "') for v in variants), variants
        kept = [v for v in variants if f"string {v[12:-1].lower()}" in phrases]
        assert len(kept) >= 3 and variants[: len(kept)] == kept, variants  # (every such word first)
    plain = string_variants(value, [bug], WORDS, random.Random(0), COPIES - 1)
    assert any(f"string {v[12:-1].lower()}" not in phrases for v in plain)  # (what a draw without them gives)


def test_a_lists_numbers_change_last_and_a_bug_that_leaves_only_them_unshown_gets_no_canaries() -> None:
    """``'1. Initial component\\n2. Entered interactive mode'``: a copy renumbered ``4.`` and ``5.``
    is told by its numbering (the package writes ``2. Entered interactive mode``; an adversary's
    forger found the twin in every draw of 11 ``swe:fire`` tasks, 2026-12-07). Where nothing of the
    bug's is known, the copies change its words and keep the numbers; where the bug shows all but
    the numbers, the site is shown (``shown_by_bug``) and gets none."""
    value = "1. Initial component\n2. Entered interactive mode"
    assert list_ordinals(value) == {0, 7}
    assert list_ordinals("Step 1. done\n 3) next") == {7}  # (a number that starts no line numbers nothing)
    assert list_ordinals("3.14 is pi\n2.5") == set()  # (nor does a decimal number)
    for seed in range(20):
        variants = string_variants(value, [], WORDS, random.Random(seed), COPIES - 1)
        assert variants and all(v.startswith("1. ") and "\n2. " in v for v in variants), variants
    assert shown_by_bug(value, {0: ["-1. Initial component\n0. Entered interactive mode"]})
    assert not shown_by_bug(value, {0: ["-1. Initial thing\n0. Entered interactive mode"]})  # (a word to change)
