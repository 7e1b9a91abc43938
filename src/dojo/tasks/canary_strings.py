"""The strings a string site's canaries expect: variants of the test's own string, of its shape.

A forger that runs the tree as given sees what the bug computes where the test expects a string,
and a bug's result most often holds most of the right string (``'-1. Initial component'`` where
``'1. Initial component'`` is expected, ``['rice |', 'beans |']`` where ``'rice | beans |'`` is).
Canaries that expect other strings of the file (``'example error'``) are then told from the twin
at a glance: the copy nearest the bug's result is the twin. Found by an adversary (2026-12-07): a
forger that made that copy pass, and no other, was paid on 11 of 20 ``swe:fire`` tasks (the
design's figure is 1 in 20).

So a string's canaries are the string itself, changed only where it holds what the bug's result
does not (``unshown_places``: its words, numbers, punctuation marks and runs of space that are none
of the tokens of what the bug computed, ``avoid``), each such token replaced by one of its kind (a
number of as many digits, another word of the test file in the same case, another mark or run of
space). What every copy shares with the bug's result is the same, so nearness to it does not tell
them apart, nor which copy is the others' center. Where the bug's result is not known (nothing was
recorded: it raised before the comparison), one or two of the string's words or numbers, drawn for
each grading, are the places that change. A site whose every token the bug's result shows cannot
hide its twin; ``dojo.tasks.canary_shown.shown_by_bug`` keeps such sites from being chosen.
"""

from __future__ import annotations

import collections
import functools
import math
import random
import re
from collections.abc import Container, Sequence

_TOKEN = re.compile(r"\d+|[^\W\d_]+|\s+|.", re.S)  # numbers, words, runs of space, any other character
_WORD = re.compile(r"[^\W\d_]+")
PART = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")  # words, CamelCase parts, digit runs
ATTEMPTS = 50  # draws per variant wanted: a bound where few variants exist
# The most places the bug's result may leave unshown for the canaries to change there: a near miss.
# Where it shares less of the string (an empty result, another one), changing every unshown token
# (marks and spaces too) made the twin the only readable copy: a forger that picked the copy with the
# fewest odd marks found it 100 times in 100 on fire/0045 (a review, 2026-12-07).
NEAR_MISS = 3
Slot = str | None  # a template part: fixed text, or None where a token of the example's kind goes


PUNCTUATION = "!#$%&()*+,-./:;<=>?@[]^_{|}~"  # what a punctuation mark the bug changed may become
SPACES = (" ", "  ", "\t", "\n", "\n\n", " \n", "\n ", "\r\n")  # and a run of space


def _changeable(token: str, marks: bool = False) -> bool:
    """A word or a number; with ``marks``, a punctuation mark or a run of space too (where the bug
    changed one)."""
    mark = token in PUNCTUATION or token.isspace()
    return token.isdigit() or _WORD.fullmatch(token) is not None or (marks and mark)


@functools.lru_cache(maxsize=32)
def file_words(source: str) -> tuple[str, ...]:
    """The words of a test file (of its names and its strings), lower case, each as often as the file
    writes it (``_options`` draws by how often)."""
    return tuple(sorted(w.lower() for w in _WORD.findall(source) if len(w) <= 24))


def text_parts(text: str) -> frozenset[str]:
    """The parts of ``text`` (its words, the CamelCase parts of its names, its digit runs), lower case."""
    return frozenset(p.lower() for p in PART.findall(text))


def _written_by_test(token: str, written: frozenset[str]) -> bool:
    """Whether the test's own text (``written``: its ``text_parts`` outside the site) writes a part of ``token``."""
    return bool(written) and any(p.lower() in written for p in PART.findall(token))


@functools.lru_cache(maxsize=256)
def test_parts(source: str, first: int, last: int, cuts: tuple[tuple[int, int, int], ...]) -> frozenset[str]:
    """The ``text_parts`` of a test's own lines (``first`` to ``last``: its name, its inputs, its
    other assertions) with the sites' literals at ``cuts`` (line, start and end byte offsets: those
    the copies change) cut out: what a forger reads the copies against."""
    lines = source.splitlines()[first - 1 : last]
    for line, start, end in sorted(cuts, reverse=True):
        at = line - first
        if 0 <= at < len(lines):
            raw = lines[at].encode()
            lines[at] = (raw[:start] + raw[end:]).decode(errors="replace")
    return text_parts("\n".join(lines))


def share_written(name: str, written: frozenset[str]) -> float:
    """How much of a dotted name's parts (``m``, ``import``, ``star``, ``used``) the test's own text
    writes. pyflakes's tests name, in their other ``flakes(...)`` lines, the message types the site
    expects: a forger that ranked the copies by how much the test's body writes of each found the
    twin in 26.4% of draws on its 33 dotted-name sites (2026-12-07) when the others were drawn at
    random from the file's."""
    found = [p.lower() in written for p in PART.findall(name)]
    return sum(found) / max(1, len(found))


@functools.lru_cache(maxsize=32)
def _word_counts(words: tuple[str, ...]) -> dict[str, int]:
    return dict(collections.Counter(words))


MATCHED = 24  # the words a word may become: the file's this many written most nearly as often as it
# How near in how often the file writes them (log(1 + count)) two words must be, at least two of them, for
# a word the test writes to become another the test writes (else any word): with no bound, the test's
# keywords too (``'self | def |'`` for ``'rice | beans |'``: the twin the least written copy); within 0.7,
# too few such words were left and the test's body told the twin again. Measured on the recorded string
# sites (40 draws each, 2026-12-07), what the best rule expects: 30.6% before the test's words were
# kept apart, 35.7% at 0.7, 28.7% at 1.5, 26.7% at 3.0 (a word written ~20 times as often is no match).
ALIKE = 3.0


def _options(token: str, words: Sequence[str], written: frozenset[str] = frozenset()) -> list[str]:
    """The words a word token may become: the file's, of about its length (a one-letter word another
    one-letter word), the ``MATCHED`` written most nearly as often as the token (outside the site; and
    all those as near as the last), each as often as the file writes it, in the token's case. Drawn
    once each from all the file's words, the author's own words were the frequent ones and a forger
    that bet on the copy whose words the file writes most found the twin; drawn as often as the file
    writes each, the canaries' words were the frequent ones and the copy whose words the file writes
    least was the twin in 21-60% of draws on fire's strings (2026-12-07). A word about as often
    written as the one it replaces leaves the copies' counts alike (not for a word the file writes only
    in the site: ``template`` changes such a word last); drawn by its count among those, a small
    file's copies still differ from grading to grading
    (``test_the_twin_sits_at_every_likeness_rank_about_equally``). A word the test's own text writes
    (``written``: its inputs, its name) becomes another such word, and any other word one it does
    not write, among those written about as often (``ALIKE``) where there are two: a forger that
    ranks the copies by how much the test's body writes of each
    (``dojo.tasks.canary_counting.body_score``) found the twin by its input words (fire's
    ``'rice | beans |'`` from ``wrapped(["rice", "beans", ...])``), or the canaries by theirs."""
    counts = _word_counts(tuple(words))
    size = len(token)
    reach = 0 if size == 1 else max(2, size // 2)
    near = [w for w in counts if w != token.lower() and abs(len(w) - size) <= reach]
    own = math.log1p(max(0, counts.get(token.lower(), 0) - 1))  # (the site's own occurrence is not counted)
    if written:  # the test's words for the test's word, the others' for the others, where two are about as written
        test = _written_by_test(token, written)
        alike = [w for w in near if _written_by_test(w, written) == test and abs(math.log1p(counts[w]) - own) <= ALIKE]
        if len(alike) >= 2:
            near = alike
    far = sorted(abs(math.log1p(counts[w]) - own) for w in near)[MATCHED - 1 : MATCHED] or [math.inf]
    near = [w for w in near if abs(math.log1p(counts[w]) - own) <= far[0] for _ in range(counts[w])]  # (ties kept)
    return _in_case(token, near)


def _in_case(token: str, words: list[str]) -> list[str]:
    """``words`` (lower case) in ``token``'s case."""
    if token.isupper() and len(token) > 1:
        return [w.upper() for w in words]
    return [w.capitalize() for w in words] if token[:1].isupper() else words


def _draw(
    token: str,
    words: Sequence[str],
    rng: random.Random,
    marks: str = PUNCTUATION,
    written: frozenset[str] = frozenset(),
    options: Sequence[str] | None = None,
) -> str:
    """Another token of ``token``'s kind: a number of as many digits, a word from ``words`` (of
    ``options`` where given), a mark of ``marks`` (the string's own: a made-up mark is the canary's
    tell), a run of space."""
    if token.isdigit():
        if len(token) > 1 and token[0] != "0":
            return str(rng.randrange(10 ** (len(token) - 1), 10 ** len(token)))
        return "".join(rng.choice("0123456789") for _ in token)
    if token in PUNCTUATION:
        return rng.choice(marks.replace(token, "") or PUNCTUATION)
    if token.isspace():
        return rng.choice(SPACES)
    if options is None:
        options = _options(token, words, written)
    return rng.choice(options) if options else token


def _count(token: str, words: Sequence[str], written: frozenset[str] = frozenset()) -> int:
    """How many tokens ``_draw`` can give for ``token`` (itself included)."""
    if token.isdigit():
        return int(9 * 10 ** (len(token) - 1) if len(token) > 1 and token[0] != "0" else 10 ** len(token))
    if token in PUNCTUATION or token.isspace():
        return len(PUNCTUATION) if token in PUNCTUATION else len(SPACES)
    return len(set(_options(token, words, written))) + 1


def bug_tokens(avoid: Sequence[object]) -> frozenset[str]:
    """Every token of what the bug computed (``avoid``: its strings, and its numbers as text)."""
    out: set[str] = set()
    for value in avoid:
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            out.update(_TOKEN.findall(str(value)))
    return frozenset(out)


def unshown_places(value: str, avoid: Sequence[object]) -> list[int] | None:
    """The places (token indices) of ``value`` that hold what the bug's result (``avoid``) does not:
    words, numbers, marks or runs of space that are none of its tokens. None when nothing of the
    bug's is known."""
    if not any(isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in avoid):
        return None
    seen = bug_tokens(avoid)
    return [i for i, token in enumerate(_TOKEN.findall(value)) if token not in seen and _changeable(token, marks=True)]


def list_ordinals(value: str) -> set[int]:
    """The places (token indices) of ``value`` that number the items of a list: a number that starts
    a line and is followed by ``.`` or ``)`` and a space (``'1. Initial component\n2. Entered
    interactive mode'``).
    A canary that renumbers a list is told from the twin by its numbering alone, and the package
    writes its items with their numbers (``2. Entered interactive mode``): an adversary's forger
    that ranked the copies by the longest stretch of each that the package writes found the twin in
    every draw of 11 ``swe:fire`` tasks whose bug left only such a number unshown (2026-12-07)."""
    tokens = _TOKEN.findall(value)
    found = set()
    for i, token in enumerate(tokens):
        starts = i == 0 or (tokens[i - 1].isspace() and (i == 1 or "\n" in tokens[i - 1]))
        marked = i + 1 < len(tokens) and tokens[i + 1] in ".)"
        if token.isdigit() and starts and marked and (i + 2 == len(tokens) or tokens[i + 2].isspace()):
            found.add(i)  # (``3.14`` is a number, not an item)
    return found


def template(
    value: str,
    avoid: Sequence[object],
    words: Sequence[str],
    rng: random.Random,
    want: int,
    written: frozenset[str] = frozenset(),
    phrases: Container[str] = frozenset(),
) -> list[tuple[Slot, str]]:
    """``value`` as parts (fixed text, or a slot with ``value``'s token there): slots where it holds
    what the bug's result does not (``unshown_places``) where those are a near miss (``NEAR_MISS``
    places at most), else words or numbers of it drawn at random, as many as it takes for ``want``
    variants. A token the test's own text writes (``written``), a word that makes with the word
    before or after it a pair the package writes (``phrases``, ``canary_package.word_pairs``), or
    the number of a list's item (``list_ordinals``) is what the bug's result shows: kept where
    another place can change, else changed last (the twin alone would keep the test's word, the
    package's phrase, or a list numbered in order)."""
    mine = _TOKEN.findall(value)
    places = unshown_places(value, avoid)

    ordinals = list_ordinals(value)

    def told(i: int) -> bool:
        return i in ordinals or _written_by_test(mine[i], written) or _in_phrase(mine, i, phrases)

    if places and len(places) <= NEAR_MISS:
        kept = [i for i in places if not told(i)]
        for i in [i for i in places if told(i)]:  # (told places too, where the others give too few variants)
            if math.prod(_count(mine[k], words, written) for k in kept) > want:
                break
            kept.append(i)
        return [(None if i in kept else token, token) for i, token in enumerate(mine)]
    drawn = [i for i, token in enumerate(mine) if _changeable(token)]
    rng.shuffle(drawn)
    # a word the file writes only here goes last: every word a canary can take is written somewhere,
    # so changing it leaves the twin the least written copy (a review, 2026-12-07: 0.28 of draws);
    # a word the test's own text writes goes after it
    counts = _word_counts(tuple(words))
    drawn.sort(key=lambda i: (told(i), _WORD.fullmatch(mine[i]) is not None and counts.get(mine[i].lower(), 0) <= 1))
    chosen: set[int] = set()
    room = 1
    for i in drawn:  # (as many places as it takes: a draw of two too narrow ones left a grading without canaries)
        if room > want:
            break
        chosen.add(i)
        room *= _count(mine[i], words, written)
    return [(None if i in chosen else token, token) for i, token in enumerate(mine)]


def _in_phrase(tokens: list[str], i: int, phrases: Container[str]) -> bool:
    """Whether the word at ``tokens[i]`` makes, with the word before or after it, a pair ``phrases`` holds."""
    if _WORD.fullmatch(tokens[i]) is None:
        return False
    words = [j for j, token in enumerate(tokens) if _WORD.fullmatch(token)]
    at = words.index(i)
    pairs = [(words[at - 1], i)] if at > 0 else []
    pairs += [(i, words[at + 1])] if at + 1 < len(words) else []
    return any(f"{tokens[a].lower()} {tokens[b].lower()}" in phrases for a, b in pairs)


def string_variants(
    value: str,
    avoid: Sequence[object],
    words: Sequence[str],
    rng: random.Random,
    want: int,
    written: frozenset[str] = frozenset(),
    phrases: Container[str] = frozenset(),
) -> list[str]:
    """Up to ``want`` distinct strings of ``value``'s shape (see the module doc), none ``value``
    and none of ``avoid`` (what the bug computes: a canary must not pass on it). ``written``: the
    ``text_parts`` the test's own text writes outside the site; ``phrases``: the pairs of words the
    package writes (see ``template``)."""
    parts = template(value, avoid, words, rng, want, written, phrases)
    marks = "".join(sorted({token for _, token in parts if token in PUNCTUATION})) or PUNCTUATION
    banned = {value, *(v for v in avoid if isinstance(v, str))}
    options = {j: phrase_options(parts, j, _options(token, words, written), words, phrases)
               for j, (slot, token) in enumerate(parts) if slot is None and _WORD.fullmatch(token)}  # fmt: skip
    found: dict[str, None] = {}
    for kept in (options, {}):  # (the words that keep the package's phrases first; any, where they give too few)
        for _ in range(ATTEMPTS * want):
            if len(found) >= want:
                break
            text = "".join(
                slot if slot is not None else _draw(token, words, rng, marks, written, kept.get(j))
                for j, (slot, token) in enumerate(parts)
            )
            if text not in banned:
                found[text] = None
    return list(found)


def phrase_options(
    parts: Sequence[tuple[Slot, str]], j: int, options: list[str], words: Sequence[str], phrases: Container[str]
) -> list[str]:
    """Of ``options`` (the words the word slot ``parts[j]`` may take), those that make with the
    fixed word before it, and the one after it, the pairs the package writes (``phrases``) where the
    string's own word does; where fewer than two of them do, the file's other words (``words``) that
    do, each as often as the file writes it. A word of a phrase changed to one that makes none left
    the twin the one copy whose words the package writes together (``'The string "Test"'`` of
    ``swe:fire``: an adversary's forger that ranked the copies by the longest stretch of each that
    the package writes found it in every draw, 2026-12-07). All of ``options`` where the word makes
    no such pair, or no two words of the file do."""
    word = [k for k, (_, token) in enumerate(parts) if _WORD.fullmatch(token)]
    at = word.index(j)
    token = parts[j][1]
    own = token.lower()
    sides: list[tuple[str, bool]] = []  # (the fixed neighbour, whether it comes first)
    if at > 0 and parts[word[at - 1]][0] is not None:
        sides.append((parts[word[at - 1]][1].lower(), True))
    if at + 1 < len(word) and parts[word[at + 1]][0] is not None:
        sides.append((parts[word[at + 1]][1].lower(), False))
    held = [(n, first) for n, first in sides if _pair(n, own, first) in phrases]
    if not held:
        return options
    counts = _word_counts(tuple(words))
    wider = _in_case(token, [w for w in counts if w != own for _ in range(counts[w])])
    for pool in (options, wider):
        for need in (held, *([side] for side in held if len(held) > 1)):  # (both pairs, else either)
            kept = [w for w in pool if all(_pair(n, w.lower(), first) in phrases for n, first in need)]
            if len({w.lower() for w in kept}) >= 2:
                return kept
    return options


def _pair(neighbour: str, word: str, first: bool) -> str:
    return f"{neighbour} {word}" if first else f"{word} {neighbour}"
