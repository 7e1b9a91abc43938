"""The examples a prompt shows: its doctest lines ``>>> entry(<literals>)`` and the literal on the
line after each, as (arguments, expected value) pairs.

A model saw them, so they are what a task may give back as visible tests (``dojo.tasks.humaneval``)
and what a table of shown answers would hold (``dojo.rewards.hacks``).
"""

from __future__ import annotations

import ast
from typing import Any

Example = tuple[list[Any], Any]


def prompt_examples(prompt: str, entry_point: str | None) -> list[Example]:
    """The ``>>> entry_point(...)`` examples of ``prompt`` whose arguments and result are literals."""
    if not entry_point:
        return []
    found: list[Example] = []
    lines = prompt.splitlines()
    for i, line in enumerate(lines):
        text = line.strip()
        if not text.startswith(f">>> {entry_point}("):
            continue
        try:
            call = ast.parse(text[4:], mode="eval").body
            if not isinstance(call, ast.Call) or call.keywords:
                continue
            args = [ast.literal_eval(a) for a in call.args]
            expected = ast.literal_eval(lines[i + 1].strip()) if i + 1 < len(lines) else None
        except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
            continue
        found.append((args, expected))
    return found
