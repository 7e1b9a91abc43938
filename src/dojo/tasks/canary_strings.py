"""The strings a string site's canaries expect: variants of the test's own string, of its shape.

A forger that runs the tree as given sees what the bug computes where the test expects a string,
and a bug's string is most often a near miss of the right one (``'-1. Initial component'`` where
``'1. Initial component'`` is expected). Canaries that expect other strings of the file
(``'example error'``) are then told from the twin at a glance: the copy closest to the bug's string
is the twin. Found by an adversary (2026-12-07): a forger that made that copy pass, and no other,
was paid on 11 of 20 ``swe:fire`` tasks (the design's figure is 1 in 20).

So a string's canaries are the string itself with its words and numbers changed where the bug
changes it: the bug's string (the one of ``avoid`` most like the test's) is the center, the test's
string and each canary differ from it at the same places, by tokens of the same kind (a number of
as many digits, another word of the test file in the same case). Closeness to the bug's string does
not tell them apart, nor which copy is the others' center. Where no string of the bug's is like the
test's, one or two of the string's words or numbers, drawn for each grading, are the places that
change. Spaces and punctuation never change: a canary keeps the string's form.
"""

from __future__ import annotations

import difflib
import functools
import random
import re
from collections.abc import Sequence

_TOKEN = re.compile(r"\d+|[^\W\d_]+|\s+|.", re.S)  # numbers, words, runs of space, any other character
_WORD = re.compile(r"[^\W\d_]+")
SIMILAR = 0.5  # a bug's string at least this like the test's (difflib's ratio) is the canaries' center
ATTEMPTS = 50  # draws per variant wanted: a bound where few variants exist
Slot = str | None  # a template part: fixed text, or None where a token of the example's kind goes


def _changeable(token: str) -> bool:
    return token.isdigit() or _WORD.fullmatch(token) is not None


@functools.lru_cache(maxsize=32)
def file_words(source: str) -> tuple[str, ...]:
    """The words of a test file (of its names and its strings), lower case, once each."""
    return tuple(sorted({w.lower() for w in _WORD.findall(source) if 2 <= len(w) <= 24}))


def _options(token: str, words: Sequence[str]) -> list[str]:
    """The words a word token may become: the file's, of about its length, in its case."""
    near = [w for w in words if abs(len(w) - len(token)) <= max(2, len(token) // 2) and w != token.lower()]
    if token.isupper() and len(token) > 1:
        return [w.upper() for w in near]
    return [w.capitalize() for w in near] if token[:1].isupper() else near


def _draw(token: str, words: Sequence[str], rng: random.Random) -> str:
    """Another token of ``token``'s kind: a number of as many digits, a word from ``words``."""
    if token.isdigit():
        if len(token) > 1 and token[0] != "0":
            return str(rng.randrange(10 ** (len(token) - 1), 10 ** len(token)))
        return "".join(rng.choice("0123456789") for _ in token)
    options = _options(token, words)
    return rng.choice(options) if options else token


def _count(token: str, words: Sequence[str]) -> int:
    """How many tokens ``_draw`` can give for ``token`` (itself included)."""
    if token.isdigit():
        return int(9 * 10 ** (len(token) - 1) if len(token) > 1 and token[0] != "0" else 10 ** len(token))
    return len(_options(token, words)) + 1


def _center(value: str, avoid: Sequence[object]) -> str | None:
    """The bug's string most like ``value``, where one is like it (``SIMILAR``)."""
    best, score = None, SIMILAR
    for other in avoid:
        if isinstance(other, str) and other != value:
            ratio = difflib.SequenceMatcher(None, other, value, autojunk=False).ratio()
            if ratio >= score:
                best, score = other, ratio
    return best


def template(
    value: str, avoid: Sequence[object], words: Sequence[str], rng: random.Random, want: int
) -> list[tuple[Slot, str]]:
    """``value`` as parts (fixed text, or a slot with ``value``'s token there): slots where it
    differs from the bug's string like it (what the bug changed), else one or two of its words or
    numbers drawn at random, as many as it takes for ``want`` variants."""
    mine = _TOKEN.findall(value)
    center = _center(value, avoid)
    if center is not None:
        theirs = _TOKEN.findall(center)
        parts: list[tuple[Slot, str]] = []
        matcher = difflib.SequenceMatcher(None, theirs, mine, autojunk=False)
        for tag, _i1, _i2, j1, j2 in matcher.get_opcodes():
            for token in mine[j1:j2]:  # (what the bug added, ``delete``, the test's string leaves out)
                parts.append((None if tag != "equal" and _changeable(token) else token, token))
        if any(slot is None for slot, _ in parts):
            return parts
    places = [i for i, token in enumerate(mine) if _changeable(token)]
    rng.shuffle(places)
    chosen: set[int] = set()
    room = 1
    for i in places[:2]:
        if room > want:
            break
        chosen.add(i)
        room *= _count(mine[i], words)
    return [(None if i in chosen else token, token) for i, token in enumerate(mine)]


def string_variants(
    value: str, avoid: Sequence[object], words: Sequence[str], rng: random.Random, want: int
) -> list[str]:
    """Up to ``want`` distinct strings of ``value``'s shape (see the module doc), none ``value``
    and none of ``avoid`` (what the bug computes: a canary must not pass on it)."""
    parts = template(value, avoid, words, rng, want)
    banned = {value, *(v for v in avoid if isinstance(v, str))}
    found: dict[str, None] = {}
    for _ in range(ATTEMPTS * want):
        if len(found) >= want:
            break
        text = "".join(slot if slot is not None else _draw(token, words, rng) for slot, token in parts)
        if text not in banned:
            found[text] = None
    return list(found)
