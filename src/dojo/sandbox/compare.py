"""Output comparison done on the host, outside the program's process."""

from __future__ import annotations

import math
import re


def tokens_equal(actual: str, expected: str) -> bool:
    """Equal up to whitespace: the same sequence of whitespace-separated tokens."""
    return actual.split() == expected.split()


_NUMBER = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")


def stdout_matches(actual: str, expected: str, tolerance: float = 1e-6) -> bool:
    """Token by token; tokens that are both numbers (one of them written with a point or an
    exponent) compare within ``tolerance``, relative or absolute."""
    a, e = actual.split(), expected.split()
    if len(a) != len(e):
        return False
    for x, y in zip(a, e, strict=True):
        if x == y:
            continue
        if _NUMBER.match(x) and _NUMBER.match(y) and ("." in y or "e" in y.lower() or "." in x):
            if not math.isclose(float(x), float(y), rel_tol=tolerance, abs_tol=tolerance):
                return False
            continue
        return False
    return True
