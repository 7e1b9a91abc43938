"""What shows a repo test's expected value: what the tree as given computes there (a capture run's
record, ``dojo.tasks.canary_capture``) and where the package's files write it (a site whose value
either shows gets no canaries, ``dojo.rewards.bug_mining``; the audit reports one,
``canary_site_shown``), and the messages shown to the policy (``redact``)."""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence

from dojo.tasks.canary_strings import bug_tokens, list_ordinals, unshown_places

Value = int | float | str


def captured_values(text: str) -> dict[int, list[Value]]:
    """What a capture run wrote (``dojo.tasks.canary_capture.CAPTURED``): capture index -> the
    numbers and strings compared with it (those inside a list, tuple, set or dict compared whole)."""
    out: dict[int, list[Value]] = {}
    for line in text.splitlines():
        index, _, shown = line.partition("\t")
        try:
            value = ast.literal_eval(shown)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            continue
        if index.isdigit():
            out.setdefault(int(index), []).extend(_leaves(value))
    return out


def shown_by_bug(value: Value, captured: dict[int, list[Value]]) -> bool:
    """Whether what the tree as given computes where a test expects ``value`` (``captured_values``
    of a capture run, the whole expected value's too) shows it: a number's text among its tokens
    (``'2'`` for ``2``), a string inside one of its strings or with every word, number, mark and
    run of space of it among their tokens (``['rice |', 'beans |']`` for ``'rice | beans |'``,
    ``canary_strings.unshown_places``), or all but the numbers of a list's items
    (``canary_strings.list_ordinals``: a renumbered list is no hiding place). A forger that holds
    the copies' values against what the bug computed then finds the twin, whatever the canaries:
    an adversary's forger did on 9 of 20 ``swe:fire`` tasks with such sites (2026-12-07). Such a
    site gets no canaries."""
    leaves = [leaf for found in captured.values() for leaf in found]
    if isinstance(value, str):
        places = unshown_places(value, leaves)
        told = places is not None and set(places) <= list_ordinals(value)  # (nothing, or a list's numbers only)
        return any(isinstance(leaf, str) and value and value in leaf for leaf in leaves) or told
    text = str(value)
    return any(str(leaf) == text for leaf in leaves) or text in bug_tokens(leaves)


def written_elsewhere(value: Value, texts: Sequence[str]) -> bool:
    """Whether a string site's value is written in ``texts`` (the test file, the package's files)
    besides the site itself. A string's canaries are made up (``canary_strings``) and written
    nowhere, so a forger that counts where each copy's value is written finds the twin; fire's
    ``'foo'`` was written 20 times in the package (2026-12-07, 67 of the 92 string sites). Such a
    site gets no canaries. Numbers form windows of numbers, each written somewhere, and a dotted
    name's canaries are the file's other names: no such tell (callers ask for literal sites only)."""
    return isinstance(value, str) and sum(text.count(value) for text in texts) > 1


def _leaves(value: object, depth: int = 0) -> list[Value]:
    """The numbers and strings of a value, those of its items too (keys and values of a dict)."""
    if isinstance(value, (int, float, str)) and not isinstance(value, bool):
        return [value]
    if depth > 8:
        return []
    if isinstance(value, dict):
        return [leaf for pair in value.items() for part in pair for leaf in _leaves(part, depth + 1)]
    if isinstance(value, (list, tuple, set, frozenset)):
        return [leaf for item in value for leaf in _leaves(item, depth + 1)]
    return []


def redact(text: str, values: tuple[Value, ...]) -> str:
    """``text`` without ``values`` written in it (a failure message that would name a canaried
    test's expected values, and so tell its twin from the canaries)."""
    spellings = {spelling for value in values for spelling in (repr(value), str(value))} - {""}
    for spelling in sorted(spellings, key=len, reverse=True):
        text = re.sub(rf"(?<![\w.]){re.escape(spelling)}(?![\w.])", "…", text)
    return text
