"""Return values on the wire, and how the grader compares them.

A candidate's return value is encoded *inside the sandbox* by ``encode_value``, which accepts only
exact builtin types (``type(v) is int``, never a subclass), so an object whose ``__eq__`` always
says True cannot even be sent. The grader decodes it and compares with ``values_equal`` in its own
process: the candidate's methods are never called to decide a verdict.

Encoding: JSON, with tagged objects for what JSON cannot say: ``{"$t": [...]}`` tuple,
``{"$s": [...]}`` set, ``{"$fs": [...]}`` frozenset, ``{"$d": [[k, v], ...]}`` dict (any keys),
``{"$f": "nan"|"inf"|"-inf"}``, ``{"$b": base64}`` bytes, ``{"$c": [re, im]}`` complex, and
``{"$I": hex}`` for an int too long for Python's decimal conversion (over ~4,000 digits).

Standard library only: the grading harness carries this module into the sandbox
(``dojo.sandbox.bundle``), where it encodes the candidate's values and decodes them again in the
trusted process. ``base64`` is imported only when a bytes value needs it (page faults: a grading
run that has none never loads it).
"""

from __future__ import annotations

import json
import math
from typing import Any

BIG_INT_BITS = 13_000  # ~3,900 decimal digits: under CPython's 4,300-digit limit for int <-> str
# Elements of one decoded set (or keys of one dict) allowed to share a hash with another. A set's
# elements come from the sandbox: ints chosen to collide (k * (2**61 - 1) + c all hash to c) make
# building it quadratic, 13,000 of them ~6 s of the grader's CPU for one reply. A set a program made
# has none (distinct ints below 2**61 never collide; text hashes are keyed per process).
MAX_COLLISIONS = 16
HEX = frozenset("0123456789abcdef")


MAX_JSON_DEPTH = 64  # (pydantic refuses to serialize past 255: a deeper tool call broke the trajectory store)


def untrusted_json(text: str | bytes) -> Any:
    """``json.loads`` of text a program or a model wrote, as a ``ValueError`` like any malformed
    JSON where it nests deeper than ``MAX_JSON_DEPTH`` (``'[' * 100000`` raised ``RecursionError``,
    which escaped every ``except ValueError``) or holds a lone surrogate (``"\\ud800"``: text no
    UTF-8 encoder takes, so a file or a request made of it raised ``UnicodeEncodeError``)."""
    try:
        data = json.loads(text)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
    stack: list[tuple[Any, int]] = [(data, 0)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, str):
            if not value.isascii():
                try:
                    value.encode("utf-8")
                except UnicodeEncodeError:
                    raise ValueError("JSON text holds a lone surrogate (not Unicode text)") from None
        elif isinstance(value, (list, dict)):
            if depth >= MAX_JSON_DEPTH:
                raise ValueError(f"JSON nested more than {MAX_JSON_DEPTH} deep")
            items = value.items() if isinstance(value, dict) else ((None, v) for v in value)
            for key, item in items:
                stack.append((item, depth + 1))
                if key is not None:
                    stack.append((key, depth + 1))
    return data


def encode_value(v: Any, depth: int = 0) -> Any:
    """Encode a value of exact builtin types; TypeError for anything else (subclasses included)."""
    t = type(v)
    if depth > 64:
        raise TypeError("value nested too deeply")
    if t is int and v.bit_length() > BIG_INT_BITS:  # past Python's int<->decimal text limit
        return {"$I": format(v, "x")}
    if v is None or t is bool or t is int or t is str:
        return v
    if t is float:
        if v != v:
            return {"$f": "nan"}
        if v in (float("inf"), float("-inf")):
            return {"$f": "inf" if v > 0 else "-inf"}
        return v
    if t is list:
        return [encode_value(x, depth + 1) for x in v]
    if t is tuple:
        return {"$t": [encode_value(x, depth + 1) for x in v]}
    if t is set:
        return {"$s": [encode_value(x, depth + 1) for x in v]}
    if t is frozenset:
        return {"$fs": [encode_value(x, depth + 1) for x in v]}
    if t is dict:
        if all(type(k) is str for k in v) and not any(k.startswith("$") for k in v):
            return {k: encode_value(x, depth + 1) for k, x in v.items()}
        return {"$d": [[encode_value(k, depth + 1), encode_value(x, depth + 1)] for k, x in v.items()]}
    if t is bytes:
        import base64  # only bytes values need it: kept out of every grading run that has none

        return {"$b": base64.b64encode(v).decode()}
    if t is complex:
        return {"$c": [encode_value(v.real, depth + 1), encode_value(v.imag, depth + 1)]}
    raise TypeError(f"return values must be builtin data (int, float, str, list, dict, ...), not {t.__name__}")


def decode_value(v: Any, depth: int = 0) -> Any:
    """Inverse of ``encode_value``, for data that came from the sandbox (untrusted: checked)."""
    if depth > 64:
        raise ValueError("value nested too deeply")
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, list):
        return [decode_value(x, depth + 1) for x in v]
    if isinstance(v, dict):
        if len(v) == 1:
            ((tag, body),) = v.items()
            if tag == "$t" and isinstance(body, list):
                return tuple(decode_value(x, depth + 1) for x in body)
            if tag in ("$s", "$fs") and isinstance(body, list):
                items = [decode_value(x, depth + 1) for x in body]
                _check_hashes(items, "set element")
                return set(items) if tag == "$s" else frozenset(items)
            if tag == "$d" and isinstance(body, list):
                if not all(isinstance(pair, list) and len(pair) == 2 for pair in body):
                    raise ValueError("malformed dict entry")
                keys = [decode_value(pair[0], depth + 1) for pair in body]
                _check_hashes(keys, "dict key")
                return {k: decode_value(pair[1], depth + 1) for k, pair in zip(keys, body, strict=True)}
            digits = body.lstrip("-") if isinstance(body, str) else ""
            if tag == "$I" and digits and all(c in HEX for c in digits):
                return int(body, 16)
            if tag == "$f" and body in ("nan", "inf", "-inf"):
                return float(body)
            if tag == "$b" and isinstance(body, str):
                import base64  # (as in encode_value)

                return base64.b64decode(body, validate=True)
            if tag == "$c" and isinstance(body, list) and len(body) == 2:
                re_, im = (decode_value(x, depth + 1) for x in body)
                if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (re_, im)):
                    raise ValueError("malformed complex")
                try:
                    return complex(re_, im)
                except OverflowError as e:  # (an int part too large for a float)
                    raise ValueError("malformed complex") from e
        if any(k.startswith("$") for k in v):  # encode_value writes such keys only as tags (or in $d)
            raise ValueError(f"malformed tagged value: {str(v)[:80]}")
        return {k: decode_value(x, depth + 1) for k, x in v.items()}
    raise ValueError(f"not a wire value: {type(v).__name__}")


def _check_hashes(items: list[Any], what: str) -> None:
    """ValueError where ``items`` (decoded set elements or dict keys) are not hashable, or more than
    ``MAX_COLLISIONS`` of them share a hash with another (duplicates included: an encoded set has none)."""
    try:
        hashes = [hash(x) for x in items]
    except TypeError as e:
        raise ValueError(f"{what} is not hashable") from e
    if len(hashes) - len(set(hashes)) > MAX_COLLISIONS:  # (distinct hash values never collide as keys)
        raise ValueError(f"{len(hashes) - len(set(hashes))} {what}s share a hash with another")


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def values_equal(actual: Any, expected: Any, tolerance: float = 1e-6, *, roles: bool = True) -> bool:
    """Equal as data: same builtin types (int and float count as numbers, bool does not), an
    expected float matched within ``tolerance`` (relative or absolute), an expected int exactly (as
    Python's ``==``: ``6.0`` matches ``6``, ``6.0000001`` does not), containers element by element.
    ``roles=False`` where neither side is known to be the expected one (a check's ``a == b``): an int
    on either side is matched exactly, two floats within the tolerance."""
    if _is_number(actual) and _is_number(expected):
        if isinstance(expected, float) and (roles or isinstance(actual, float)):
            try:
                if math.isnan(actual) or math.isnan(expected):
                    return math.isnan(actual) and math.isnan(expected)
                return math.isclose(actual, expected, rel_tol=tolerance, abs_tol=tolerance)
            except OverflowError:  # an int too large for a float: equal to none
                return False
        return bool(actual == expected)  # (Python compares an int and a float exactly, any size)
    if type(actual) is not type(expected):
        both_sets = isinstance(actual, (set, frozenset)) and isinstance(expected, (set, frozenset))
        if not both_sets:
            return False
    if isinstance(actual, (list, tuple)):
        return len(actual) == len(expected) and all(
            values_equal(a, e, tolerance, roles=roles) for a, e in zip(actual, expected, strict=True)
        )
    if isinstance(actual, dict):
        if len(actual) != len(expected):
            return False
        return all(k in actual and values_equal(actual[k], e, tolerance, roles=roles) for k, e in expected.items())
    if isinstance(actual, (set, frozenset)):
        if len(actual) != len(expected):
            return False
        remaining = list(actual)
        for e in expected:
            for i, a in enumerate(remaining):
                if values_equal(a, e, tolerance, roles=roles):
                    del remaining[i]
                    break
            else:
                return False
        return True
    return bool(actual == expected)


def returned_equal(value: Any, expected: Any, tolerance: float = 1e-6) -> bool:
    """Whether ``value``, a return value from the sandbox (wire form: untrusted), equals ``expected``
    (decoded) by ``values_equal``; a value that does not decode (``decode_value``) equals nothing."""
    try:
        return values_equal(decode_value(value), expected, tolerance)
    except (ValueError, TypeError):
        return False
