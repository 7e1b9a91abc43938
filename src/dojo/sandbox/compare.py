"""Output comparison done on the host, outside the program's process."""

from __future__ import annotations


def tokens_equal(actual: str, expected: str) -> bool:
    """Equal up to whitespace: the same sequence of whitespace-separated tokens."""
    return actual.split() == expected.split()
