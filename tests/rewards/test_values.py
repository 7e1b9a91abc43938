from __future__ import annotations

import json
import math
from typing import Any

import pytest

from dojo.tasks.values import MAX_COLLISIONS, decode_value, encode_value, returned_equal, values_equal


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        0,
        -(10**30),
        1.5,
        "s",
        [1, [2]],
        (1, "a"),
        {1, 2},
        frozenset({3}),
        {"a": 1},
        {(1, 2): [3]},
        b"\x00\xff",
        1 + 2j,
        float("inf"),
    ],
)
def test_round_trip_keeps_exact_types(value: Any) -> None:
    back = decode_value(encode_value(value))
    assert type(back) is type(value)
    assert values_equal(back, value)


def test_nan_round_trips_and_equals_nan() -> None:
    assert math.isnan(decode_value(encode_value(float("nan"))))
    assert values_equal(float("nan"), float("nan"))


def test_subclasses_and_objects_are_refused() -> None:
    class AlwaysEqual(int):
        def __eq__(self, other: object) -> bool:
            return True

        __hash__ = int.__hash__

    for bad in (AlwaysEqual(1), object(), [AlwaysEqual(2)], {"k": object()}):
        with pytest.raises(TypeError, match="builtin data"):
            encode_value(bad)


def test_comparison_is_by_type_and_tolerance() -> None:
    assert values_equal(1, 1.0)  # numbers compare as numbers
    assert not values_equal(True, 1)  # but a bool is not a number
    assert not values_equal([1, 2], (1, 2))  # a list is not a tuple
    assert values_equal(0.1 + 0.2, 0.3)
    assert not values_equal(0.3001, 0.3, tolerance=1e-6)
    assert values_equal({1.0000000001, 2}, {2, 1.0})
    assert not values_equal({"a": 1}, {"a": 1, "b": 2})


def test_an_expected_int_is_matched_exactly_an_expected_float_within_the_tolerance() -> None:
    assert values_equal(6.0, 6) and not values_equal(6.0000001, 6)  # as Python's ==: no credit for an approximation
    assert values_equal(6, 6.0000001) and values_equal(2, 2.0000000000000004)  # an int answer to a float question
    assert not values_equal([1, 2.5000001], [1, 2]) and values_equal([1, 2.5000001], [1, 2.5])
    # a check's ``a == b``: neither side is known to be the expected one, so an int on either side is exact
    assert not values_equal(6, 6.0000001, roles=False) and not values_equal(6.0000001, 6, roles=False)
    assert values_equal(0.1 + 0.2, 0.3, roles=False) and values_equal((6.0, [2]), (6, [2.0]), roles=False)


def test_an_int_too_large_for_a_float_equals_no_float() -> None:
    for expected in (0.5, float("inf"), float("nan"), 1e308):
        assert not values_equal(10**400, expected) and not returned_equal(10**400, expected)
    assert values_equal(10**400, 10**400) and not values_equal(10**400, 10**400 + 1)
    with pytest.raises(ValueError, match="complex"):
        decode_value({"$c": [10**400, 0]})


def test_set_elements_made_to_collide_are_refused_at_once() -> None:
    """Ints that all hash alike would make a set of 20,000 cost seconds to build, on the grader."""
    colliding = [k * (2**61 - 1) + 7 for k in range(20_000)]
    for wire in ({"$s": colliding}, {"$fs": colliding}, {"$d": [[k, 0] for k in colliding]}):
        with pytest.raises(ValueError, match="share a hash"):
            decode_value(wire)
    assert not returned_equal({"$s": colliding}, {7})
    few = colliding[: MAX_COLLISIONS + 1]  # up to MAX_COLLISIONS are allowed: a set as a program makes it
    assert decode_value({"$s": few}) == set(few) and decode_value({"$s": [-1, -2]}) == {-1, -2}


def test_untrusted_wire_data_is_checked() -> None:
    with pytest.raises(ValueError):
        decode_value({"$d": [[1]]})
    with pytest.raises(ValueError):
        decode_value({"$s": [[1, 2]]})  # a list cannot be a set element


def test_ints_past_the_decimal_text_limit_travel_as_hex() -> None:
    for big in (2**20000, -(3**9000), 10**4299):
        wire = encode_value(big)
        assert decode_value(json.loads(json.dumps(wire))) == big
    assert encode_value(2**100) == 2**100  # ordinary ints stay plain JSON
    for bad in ({"$I": ""}, {"$I": "xyz"}, {"$I": 12}):
        with pytest.raises(ValueError):
            decode_value(bad)


def test_untrusted_json_refuses_what_no_later_step_could_take() -> None:
    from dojo.tasks.values import MAX_JSON_DEPTH, untrusted_json

    assert untrusted_json("[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH) is not None
    for bad, why in (
        ("[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1), "nested more than"),
        ("[" * 100_000, "nested too deeply"),
        ('{"a": "\\ud800"}', "surrogate"),
        ('{"\\udfff": 1}', "surrogate"),
    ):
        with pytest.raises(ValueError, match=why):
            untrusted_json(bad)
    assert untrusted_json('{"a": "\\u00e9\\ud83d\\ude00"}') == {"a": "\u00e9\U0001f600"}  # a pair is fine
