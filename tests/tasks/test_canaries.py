"""Canary twins: copies of a test that differ only in the value they expect, one of them the test."""

from __future__ import annotations

import ast
import collections
import random
from typing import Any

import pytest

from dojo.tasks.canaries import (
    COPIES,
    CanaryGroup,
    TestNode,
    canary_group,
    capture_text,
    literal_sites,
)
from dojo.tasks.canary_shown import captured_values, shown_by_bug, written_elsewhere

TESTS = """\
import unittest

import pytest
from pkg import double, name_of, point

X = 4


def helper():
    return 1


def test_double():
    assert double(2) == 4
    assert double(-3) == -6


@pytest.mark.parametrize("x", [1, 2])
def test_param(x):
    assert double(x) * 0 == 0.0


def test_no_values():
    assert double(2) == double(1) * 2
    assert double(0) is not None


def test_bound():
    expected = {"a": [1, 2]}
    assert point("a") == expected


def test_bound_but_also_an_input():
    expected = [1, 2]
    assert double(expected) == expected


class TestNames(unittest.TestCase):
    def test_name(self):
        self.assertEqual(name_of(1), "one")
"""


def run_copies(group: CanaryGroup, namespace: dict[str, Any], cls: str | None = None) -> dict[str, bool]:
    """Our own generated test file, executed here (no candidate code): which copies pass."""
    code = compile(group.text.replace("from pkg import double, name_of, point\n", ""), group.path, "exec")
    exec(code, namespace)
    passed = {}
    for node in group.members:
        name = TestNode.parse(node).name
        fn = namespace[name] if cls is None else getattr(namespace[cls](), name)
        try:
            fn()
            passed[node] = True
        except AssertionError:
            passed[node] = False
    return passed


def copy_values(group: CanaryGroup) -> dict[str, tuple[str, ...]]:
    """What each copy expects: the values its one statement passes to the shared body."""
    names = {TestNode.parse(n).name: n for n in group.members}
    out = {}
    for fn in ast.walk(ast.parse(group.text)):
        if isinstance(fn, ast.FunctionDef) and fn.name in names:
            [stmt] = fn.body
            assert isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
            out[names[fn.name]] = tuple(ast.unparse(k.value) for k in stmt.value.keywords if k.arg.startswith("_v"))
    assert len(out) == COPIES
    return out


def test_node_ids_are_taken_apart_and_renamed() -> None:
    node = TestNode.parse("a/tests/test_x.py::TestY::test_z[1-2]")
    assert (node.path, node.cls, node.name, node.params) == ("a/tests/test_x.py", "TestY", "test_z", "[1-2]")
    assert node.renamed("test_z_3") == "a/tests/test_x.py::TestY::test_z_3[1-2]"
    assert str(TestNode.parse("t.py::test_a")) == "t.py::test_a"
    for bad in ("t.py", "t.txt::test_a", "t.py::a::b::c", "t.py::not a name"):
        with pytest.raises(ValueError, match="node id"):
            TestNode.parse(bad)


def test_the_values_a_test_expects_are_found_and_nothing_else() -> None:
    assert [s.value for s in literal_sites(TESTS, TestNode.parse("t.py::test_double"))] == [4, -6]
    assert [s.value for s in literal_sites(TESTS, TestNode.parse("t.py::test_param[1]"))] == [0.0]
    assert literal_sites(TESTS, TestNode.parse("t.py::test_no_values")) == []  # no value written out
    assert [s.value for s in literal_sites(TESTS, TestNode.parse("t.py::test_bound"))] == [1, 2]  # via the name
    assert (
        literal_sites(TESTS, TestNode.parse("t.py::test_bound_but_also_an_input")) == []
    )  # changing it changes the input
    assert [s.value for s in literal_sites(TESTS, TestNode.parse("t.py::TestNames::test_name"))] == ["one"]
    assert literal_sites(TESTS, TestNode.parse("t.py::test_missing")) == []


def test_exactly_the_twin_passes_on_right_code_and_no_two_copies_ever_pass_together() -> None:
    rng = random.Random(1)
    group = canary_group(TESTS, TestNode.parse("t.py::test_double"), 0, rng)
    assert group is not None and len(group.members) == COPIES and len(group.canaries) == COPIES - 1
    ast.parse(group.text)  # the file is still Python
    passed = run_copies(group, {"double": lambda x: 2 * x})
    assert [n for n, ok in passed.items() if ok] == [group.twin]
    for wrong in (lambda x: 2 * x + 1, lambda x: x * x, lambda x: 5):  # any code: at most one copy passes
        assert sum(run_copies(group, {"double": wrong}).values()) <= 1
    # an object equal to everything passes every copy: what the grader calls forged
    always = type("Always", (), {"__eq__": lambda self, other: True, "__hash__": lambda self: 0})()
    assert all(run_copies(group, {"double": lambda x: always}).values())
    assert group.values == (4,)
    assert "def test_double(" not in group.text and group.text.count("def test_double_") == COPIES
    # the copies call one body: its assertions are written (and rewritten by pytest) once
    assert group.text.count("assert double(2) == _v0") == 1 and group.text.count("_test_double(_v0=") == COPIES
    assert "def helper():" in group.text and "def test_param(x):" in group.text  # the rest is untouched


def test_neither_the_position_nor_the_value_tells_the_twin() -> None:
    """Over many gradings the twin sits at every position, and the value it expects at every rank
    among the copies' values, about equally often."""
    positions: collections.Counter[int] = collections.Counter()
    ranks: collections.Counter[int] = collections.Counter()
    rng = random.Random(7)
    runs = 30 * COPIES
    for _ in range(runs):
        group = canary_group(TESTS, TestNode.parse("t.py::test_double"), 0, rng)
        assert group is not None
        positions[group.members.index(group.twin)] += 1
        values = [int(v[0]) for v in copy_values(group).values()]
        ranks[sorted(values).index(4)] += 1
    assert set(positions) == set(range(COPIES)) and set(ranks) == set(range(COPIES))
    for counts in (positions, ranks):  # 30 expected in each: beyond these is more than 5 standard deviations
        assert max(counts.values()) < 60 and min(counts.values()) > 6


def test_strings_take_variants_or_other_strings_of_the_file_and_small_pools_combine_sites() -> None:
    strings = "\n".join(f"S{i} = {f'word{i}'!r}" for i in range(25))
    group = canary_group(TESTS + strings + "\n", TestNode.parse("t.py::TestNames::test_name"), 0, random.Random(2))
    assert group is not None and group.twin.startswith("t.py::TestNames::test_name_")
    passed = run_copies(group, {"name_of": lambda n: "one", "self": None}, cls="TestNames")
    assert [n for n, ok in passed.items() if ok] == [group.twin]
    # a string with no word or number to change, and too few other strings for twenty copies: none
    bare = TESTS.replace('"one"', '"--"')
    assert canary_group(bare, TestNode.parse("t.py::TestNames::test_name"), 0, random.Random(2)) is None
    # dotted names (pyflakes's message types), four in the file: 4 x 4 < 20, so three sites change
    flakes = (
        "from pyflakes import messages as m\n\n\nclass Test:\n    def test_it(self):\n"
        "        self.flakes('a', m.UndefinedName)\n        self.flakes('b', m.UnusedImport, m.UnusedVariable)\n"
        "        self.flakes('c', m.ImportShadowedByLoopVar)\n"
    )
    group = canary_group(flakes, TestNode.parse("t.py::Test::test_it"), 0, random.Random(3))
    assert group is not None and group.values == ("m.UndefinedName", "m.UnusedImport", "m.UnusedVariable")
    ast.parse(group.text)
    assert len(set(copy_values(group).values())) == COPIES  # twenty different expectations


def test_a_negative_value_stays_one_comparison_and_names_in_use_are_left_alone() -> None:
    group = canary_group(TESTS, TestNode.parse("t.py::test_double"), 1, random.Random(4))
    assert group is not None
    passed = run_copies(group, {"double": lambda x: 2 * x})
    assert [n for n, ok in passed.items() if ok] == [group.twin]
    taken = TESTS + "\n\ndef test_double_7():\n    pass\n"
    assert canary_group(taken, TestNode.parse("t.py::test_double"), 0, random.Random(4)) is None


def test_a_parametrized_test_keeps_its_parameters() -> None:
    group = canary_group(TESTS, TestNode.parse("t.py::test_param[1]"), 0, random.Random(5))
    assert group is not None and group.twin.endswith("[1]") and all(c.endswith("[1]") for c in group.canaries)
    assert group.text.count('@pytest.mark.parametrize("x", [1, 2])') == COPIES


def test_no_copy_expects_the_same_values_in_another_order() -> None:
    """pyflakes sorts the message types it expects: ``flakes(src, m.A, m.B)`` and ``flakes(src, m.B,
    m.A)`` are the same test, so a canary that swaps them would pass with its twin (found by the
    audit of swe:pyflakes: the reference was called forged)."""
    flakes = (
        "from pyflakes import messages as m\n\n\nclass Test:\n    def test_it(self):\n"
        "        self.flakes('a', m.UndefinedName, m.UnusedIndirectAssignment)\n"
        "        self.flakes('b', m.UnusedImport, m.UnusedVariable, m.ImportStarUsed)\n"
    )
    node = TestNode.parse("t.py::Test::test_it")
    for seed in range(200):
        group = canary_group(flakes, node, 0, random.Random(seed))
        assert group is not None
        twin = sorted(group.values[:2])
        assert sum(sorted(v[:2]) == twin for v in copy_values(group).values()) == 1, seed  # only the twin


def test_a_canaried_test_must_be_a_node_id_in_the_tree() -> None:
    from dojo.tasks.model import Canary, Task, TestCase, Workspace

    def task(code: str, files: dict[str, str]) -> Task:
        return Task(id="t", form="repo", prompt="p", tests=[TestCase(code=code, canary=Canary())],
                    workspace=Workspace(files=files))  # fmt: skip

    with pytest.raises(ValueError, match="node id of the form"):
        task("t.py::not a test", {"t.py": TESTS})
    with pytest.raises(ValueError, match="among the workspace's files"):
        task("t.py::test_double", {})
    assert task("t.py::test_double", {"t.py": TESTS}).tests[0].canary == Canary()


def test_a_result_compared_with_a_written_out_value_is_not_an_expectation() -> None:
    """``lines = WrappedJoin(['rice', ...])`` then ``assertEqual(['rice | beans |', ...], lines)``: the
    call (a CamelCase function reads like an object built from values) is the code's input, and the
    written-out list is what it must give. Its input was canaried (fire's ``test_wrap_*``): each copy
    computed something else, and a forger that ran them found the one whose result matched."""
    source = (
        "def test_wrap():\n    lines = WrappedJoin(['rice', 'beans'], width=15)\n"
        "    assertEqual(['rice | beans |'], lines)\n\n\n"
        "def test_bound():\n    want = Point(1, 2)\n    assert f() == want\n"
    )
    assert [s.value for s in literal_sites(source, TestNode.parse("t.py::test_wrap"))] == ["rice | beans |"]
    assert [s.value for s in literal_sites(source, TestNode.parse("t.py::test_bound"))] == [1, 2]  # still a value


def test_the_whole_expected_value_is_captured_and_a_site_the_bug_shows_gets_no_canaries() -> None:
    """What the bug computes is recorded for the whole expected value too (a list of another length
    fails before any item is compared); a site whose value the bug's result shows (in another type,
    at another place, inside a string) cannot hide its twin."""
    source = "def test_a():\n    assert f() == [1, 'x']\n\n\n"
    source += "def test_b():\n    expected = 1, 'x'\n    assert g() == expected\n"
    text = capture_text(source, TestNode.parse("t.py::test_a"), 0)
    assert text is not None and "_dojo_capture(1000, ([_dojo_capture(0, 1), _dojo_capture(1, 'x')]))" in text
    # a value bound to a name, and one a helper compares (which may check its type first), only item by item
    text = capture_text(source, TestNode.parse("t.py::test_b"), 0)
    assert text is not None and "expected = _dojo_capture(0, 1), _dojo_capture(1, 'x')\n" in text
    ast.parse(text)
    helper = "class T:\n    def test_c(self):\n        self.assertListEqual([1, 'x'], f())\n"
    text = capture_text(helper, TestNode.parse("t.py::T::test_c"), 0)
    assert text is not None and "_dojo_capture(1000" not in text and "_dojo_capture(0, 1)" in text
    captured = captured_values("1000\t['', ('rice | ', 7)]\n0\t'2'\n5\tnot a value\n")
    assert captured == {1000: ["", "rice | ", 7], 0: ["2"]}
    assert shown_by_bug(2, captured) and shown_by_bug("rice", captured) and shown_by_bug(7, captured)
    assert not shown_by_bug(3, captured) and not shown_by_bug("beans", captured) and not shown_by_bug(27, captured)


def test_a_string_written_elsewhere_in_the_package_gets_no_canaries() -> None:
    """A string's canaries are made up and written nowhere: where the tree writes the twin's string
    besides the site (fire's ``'foo'``, 20 times), counting where each copy's value is written finds
    it. Numbers are windows of numbers, each written somewhere."""
    test = "def test_a():\n    assert f() == 'Beaker toy'\n"
    assert not written_elsewhere("Beaker toy", [test, "def f():\n    return 'x'\n"])
    assert written_elsewhere("Beaker toy", [test, "NAME = 'Beaker toy'\n"])
    assert written_elsewhere("foo", [test + "\n\ndef test_b():\n    assert g() == 'foo'\n", ""]) is False
    assert written_elsewhere("foo", ["def test_b():\n    assert g('foo') == 'foo'\n"])
    assert not written_elsewhere(3, ["x = 3\n", "y = 3\n"])


def test_a_test_that_opens_with_a_decorated_function_is_copied_whole() -> None:
    """The copies' ``def`` lines ended where the test's first statement began, and a nested function's
    decorator sits above that: each copy held the decorator alone, and the file did not parse
    (toolz's ``test_memoize_key``, found 2026-12-07)."""
    source = (
        "from pkg import memoize\n\n\ndef test_key():\n    @memoize(key=len)\n    def f(x):\n        return x\n\n"
        "    assert f(3) == 3\n"
    )
    group = canary_group(source, TestNode.parse("t.py::test_key"), 0, random.Random(1))
    assert group is not None
    tree = ast.parse(group.text)
    copies = [f for f in tree.body if isinstance(f, ast.FunctionDef) and f.name.startswith("test_key_")]
    assert len(copies) == COPIES and all(len(f.body) == 1 and not f.decorator_list for f in copies)


def test_the_tests_other_sites_that_expect_the_same_change_with_it() -> None:
    """A value the test expects twice is read from one parameter at both places: the body the
    copies share does not write the twin's value (a forger that counts what the body writes found
    it there); where that leaves too few values (two names in the file), the other site stays."""
    source = "def test_twice():\n    assert f(1) == 7\n    assert g(2) == 7\n    assert h() == 'seven'\n"
    group = canary_group(source, TestNode.parse("t.py::test_twice"), 0, random.Random(0))
    assert group is not None and group.body.count("== _v0") == 2 and "7" not in group.body
    assert "== 'seven'" in group.body  # (another value: not linked)
    ast.parse(group.text)
    names = "import m\n\nOTHER = [m.B, m.C]\n\n\ndef test_n():\n" + "    flakes('x', m.A)\n" * 5
    group = canary_group(names, TestNode.parse("t.py::test_n"), 0, random.Random(0))
    assert group is not None and group.body.count("m.A") == 2  # (3 names, one site: too few; 3 sites of 5 change)
    # a dotted name never changes with its others: what the bug reports for one is not recorded, and
    # a name written at every place passed on a bug that reports it at each (pyflakes/0031)
    many = names.replace("[m.B, m.C]", "[" + ", ".join(f"m.N{i}" for i in range(25)) + "]")
    group = canary_group(many, TestNode.parse("t.py::test_n"), 0, random.Random(0))
    assert group is not None and group.body.count("m.A") == 4 and group.body.count("_v0") == 2
