"""tools tasks: calls read from a completion and checked outside any sandbox by BFCL's rules
(``bfcl``) or without its quirks (``strict``); the bfcl: source; the audit of its answers; the ways
a model might be paid for calls it did not get right."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from dojo.rewards import Grader
from dojo.rewards.audit import malformed_answer
from dojo.rewards.calls import RULES, check_calls, parse_calls
from dojo.rewards.config import GradingConfig
from dojo.sandbox import AsyncSandbox
from dojo.tasks import load_source
from dojo.tasks.bfcl import CATEGORIES
from dojo.tasks.model import Task, TaskMetadata, TestCase
from dojo.tasks.sources import known_unverifiable
from tests.tasks.bfcl_parity import bfcl_verdict

SCHEMAS = {
    "geo.distance": {
        "type": "dict",
        "properties": {
            "a": {"type": "string"}, "b": {"type": "string"}, "unit": {"type": "string"},
            "precision": {"type": "float"}, "stops": {"type": "array", "items": {"type": "string"}},
            "filters": {"type": "dict", "properties": {}},
        },
        "required": ["a", "b"],
    }
}  # fmt: skip
EXPECTED = {
    "calls": [{"geo.distance": {"a": ["New York", "NYC"], "b": ["Paris"], "unit": ["km", ""], "precision": ["", 1.0],
                                "stops": ["", ["Dublin"]], "filters": ["", {"mode": ["air"]}]}}],
    "schemas": SCHEMAS,
}  # fmt: skip


def ok(text: str, expected: dict[str, Any] = EXPECTED) -> bool:
    return check_calls(parse_calls(text), expected)[0]


def test_calls_are_read_in_every_form() -> None:
    want = [("geo.distance", {"a": "NYC", "b": "Paris"})]
    assert (
        parse_calls('<tool_call>{"name": "geo.distance", "arguments": {"a": "NYC", "b": "Paris"}}</tool_call>') == want
    )
    assert parse_calls('[{"name": "geo.distance", "arguments": "{\\"a\\": \\"NYC\\", \\"b\\": \\"Paris\\"}"}]') == want
    assert parse_calls("[geo.distance(a='NYC', b='Paris')]") == want
    assert parse_calls("```python\ngeo.distance(a='NYC', b='Paris')\n```") == want
    assert parse_calls("I would call geo.distance for you.") is None
    assert parse_calls("[geo.distance(__import__('os').system('x'))]") is None  # positional / code: not a call


async def test_answers_nested_past_the_parser_are_no_calls(fast_sandbox: AsyncSandbox) -> None:
    """``"-" * 3000 + "1"`` (~200 tokens) raised RecursionError out of the grade, which stopped the
    whole rollout; ``"lambda:" * 3000`` raised MemoryError."""
    task = load_source("bfcl:simple_python?n=1")[0]
    deep = ("-" * 3000 + "1", "lambda:" * 3000 + "1", "[" * 3000 + "f(a=1)" + "]" * 3000, "f(a=" + "[" * 3000 + ")")
    for text in deep:
        assert parse_calls(text) is None
        reward = await Grader(fast_sandbox).grade(task, text)
        assert reward.value == 0.0, reward


@pytest.mark.parametrize("source", ["bfcl:multi_turn_base?n=1", "tau2:airline?n=1", "family:scene3d?n=1"])
async def test_arguments_that_are_no_data_are_no_calls(source: str, fast_sandbox: AsyncSandbox) -> None:
    """A set, bytes, a complex number or a non-text key in a Python-syntax call: no data a call can
    carry (the calls go to a simulated API as JSON, where they had raised TypeError out of the grade
    and stopped the rollout); the answer is no calls, and scores 0."""
    task = load_source(source)[0]
    for argument in ("{1, 2}", "b'a'", "1j", "{(1, 2): 3}", "[{'k': {1}}]", "..."):
        text = f"[do_it(x={argument})]"
        assert parse_calls(text) is None, argument
        reward = await Grader(fast_sandbox).grade(task, text)
        assert reward.value == 0.0, (argument, reward)
    assert parse_calls("[do_it(x=(1, 2), y={'a': [None, True, 1.5]})]") == [
        ("do_it", {"x": (1, 2), "y": {"a": [None, True, 1.5]}})
    ]


def test_values_follow_bfcl_rules() -> None:
    assert ok('[geo_distance(a="new york", b="PARIS")]')  # dotted names may come as OpenAI's; case, spaces
    assert ok('[geo.distance(a="NYC", b="Paris", unit="km", precision=1)]')  # an int for a float
    assert ok('[geo.distance(a="NYC", b="Paris", stops=["dublin"], filters={"mode": "air"})]')
    assert not ok('[geo.distance(a="NYC")]')  # a required parameter left out
    assert not ok('[geo.distance(a="NYC", b="London")]')  # a value not allowed
    assert not ok('[geo.distance(a="NYC", b="Paris", unit="miles")]')
    assert not ok('[geo.distance(a="NYC", b="Paris", speed=3)]')  # a parameter the schema does not have
    assert not ok('[geo.distance(a="NYC", b="Paris", precision="1.0")]')  # a string for a float
    assert not ok('[geo.distance(a="NYC", b="Paris", filters={"mode": "sea"})]')
    assert not ok('[geo.distance(a="NYC", b="Paris"), geo.distance(a="NYC", b="Paris")]')  # one call too many
    assert not ok('[other(a="NYC", b="Paris")]')


def test_several_calls_match_in_any_order_one_to_one() -> None:
    two = {
        "calls": [{"f": {"x": [1]}}, {"f": {"x": [2]}}],
        "schemas": {"f": {"properties": {"x": {"type": "integer"}}}},
    }
    assert ok("[f(x=2), f(x=1)]", two) and not ok("[f(x=1), f(x=1)]", two) and not ok("[f(x=1)]", two)


def test_abstaining_and_relevance() -> None:
    assert ok("None of these tools can do that.", {"no_call": True})
    assert not ok("[f(x=1)]", {"no_call": True})
    assert ok("[f(x=1)]", {"any_call": True}) and not ok("no", {"any_call": True})


HACKS = {
    "every_allowed_value": '[geo.distance(a=["New York", "NYC"], b=["Paris"])]',  # the answer key's lists
    "stuff_every_call": "\n".join(
        f'<tool_call>{{"name": "geo.distance", "arguments": {{"a": "{a}", "b": "Paris"}}}}</tool_call>'
        for a in ("New York", "NYC", "Boston")
    ),
    "always_equal_object": "[geo.distance(a=__import__('x').Yes(), b='Paris')]",
    "call_in_prose_and_abstain": 'I will not call anything. <tool_call>{"name": "geo.distance"}</tool_call>',
    "json_injection": '<tool_call>{"name": "geo.distance", "arguments": {"a": "NYC", "b": "Paris"}, '
    '"arguments": {"a": "x"}}</tool_call>',
}


@pytest.mark.parametrize("name", sorted(HACKS))
def test_hacks_on_a_tools_task_fail(name: str) -> None:
    assert not ok(HACKS[name]), name


@pytest.mark.parametrize("category", CATEGORIES)
async def test_bfcl_references_pass_and_doing_nothing_fails(category: str, fast_sandbox: AsyncSandbox) -> None:
    tasks = load_source(f"bfcl:{category}?n=15&seed=1")
    grader = Grader(fast_sandbox)
    for task in tasks:
        assert task.form == "tools" and task.id.startswith("bfcl:")
        assert (await grader.grade(task, task.reference or "")).value == 1.0, task.id
        nothing = (await grader.grade(task, "I cannot help with that.")).value
        assert nothing == (1.0 if task.abstains else 0.0), task.id


def test_bfcl_sources_say_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="no category 'simple_rust'"):
        load_source("bfcl:simple_rust")
    with pytest.raises(ValueError, match="unknown option"):
        load_source("bfcl:simple_python?level=2")


def test_a_tools_task_needs_its_tools_and_checks() -> None:
    with pytest.raises(ValueError, match="needs tools"):
        Task(id="t", form="tools", prompt="p", tests=[TestCase(expected={"calls": []})])
    with pytest.raises(ValueError, match="needs expected"):
        Task(id="t", form="tools", prompt="p", tools=[{"type": "function", "function": {"name": "f"}}],
             tests=[TestCase(expected="f()")])  # fmt: skip


def test_java_and_javascript_arguments_are_source_text() -> None:
    """BFCL's Java and JavaScript categories: each argument is source text of the declared type,
    read by BFCL's converters; a bare JSON value where source text belongs is refused."""
    schemas = {"Store.put": {"type": "dict", "properties": {
        "ids": {"type": "ArrayList", "items": {"type": "integer"}}, "meta": {"type": "HashMap"},
        "limit": {"type": "long"}, "flag": {"type": "boolean"}}, "required": ["ids"]}}  # fmt: skip
    answer = {"ids": [[1, 2]], "meta": [{"k": ["v"]}, ""], "limit": [5, ""], "flag": [True, ""]}
    java = {"calls": [{"Store.put": answer}], "schemas": schemas, "language": "java"}

    def call(**arguments: object) -> list[tuple[str, dict[str, object]]]:
        return [("Store.put", dict(arguments))]

    assert check_calls(call(ids="new ArrayList<>(Arrays.asList(1, 2))", limit="5L", flag="true"), java)[0]
    assert check_calls(
        call(ids="new ArrayList<>(Arrays.asList(1, 2))", meta='new HashMap<String, String>() {{ put("k", "v"); }}'),
        java,
    )[0]
    assert not check_calls(call(ids=[1, 2]), java)[0]  # JSON, not Java
    assert not check_calls(call(ids="new ArrayList<>(Arrays.asList(2, 1))"), java)[0]
    assert not check_calls(call(ids="new ArrayList<>(Arrays.asList(1, 2))", limit="5"), java)[0]  # a long is 5L
    js_schemas = {"f": {"type": "dict", "properties": {"xs": {"type": "array", "items": {"type": "String"}},
                                                      "opts": {"type": "dict"}}, "required": ["xs"]}}  # fmt: skip
    js = {
        "calls": [{"f": {"xs": [["a", "b"]], "opts": [{"depth": [2]}, ""]}}],
        "schemas": js_schemas,
        "language": "javascript",
    }
    assert check_calls([("f", {"xs": "['a', 'b']", "opts": "{depth: 2}"})], js)[0]
    assert not check_calls([("f", {"xs": "['a']"})], js)[0]


@pytest.mark.parametrize("category", ["simple_java", "simple_javascript"])
def test_bfcl_java_and_javascript_references_pass(category: str) -> None:
    tasks = load_source(f"bfcl:{category}?all=1")
    failing = [t.id for t in tasks if not check_calls(parse_calls(t.reference or ""), t.tests[0].expected)[0]]
    # two of BFCL's Java answers mix types in a list whose items are declared `any`: its own converter
    # reads every item as text; one gives a HashMap key a plain text where a list of allowed values
    # belongs, which BFCL's checker iterates as characters (left out of the source unless all=1)
    java = ["bfcl:simple_java_36", "bfcl:simple_java_64", "bfcl:simple_java_65"]
    assert failing == ([] if category == "simple_javascript" else java)
    assert sorted(known_unverifiable(f"bfcl:{category}")) == failing
    assert all(t.tools[0]["function"]["parameters"]["type"] == "object" for t in tasks)


TRIANGLE = {
    "calls": [{"area": {"base": [10], "unit": ["units", ""], "label": [""], "sep": [",", ""],
                        "sizes": ["", [1.0, 2.0]], "extra": ["", {"flag": [0], "note": ["", "x"]}],
                        "weights": [[0.5, 2.0]], "tags": ["", ["a"]]}}],
    "schemas": {"area": {"type": "dict", "required": ["base"], "properties": {
        "base": {"type": "integer"}, "unit": {"type": "string"}, "label": {"type": "string", "default": ""},
        "sep": {"type": "string", "default": ","}, "sizes": {"type": "array", "items": {"type": "float"}},
        "extra": {"type": "dict", "properties": {}}, "weights": {"type": "array", "items": {"type": "float"}},
        "tags": {"type": "array", "items": {"type": "string"}}}}},
}  # fmt: skip
TRIANGLE_TASK = Task(
    id="t", form="tools", prompt="p", tools=[{"type": "function", "function": {"name": "area"}}],
    tests=[TestCase(expected=TRIANGLE)], metadata=TaskMetadata(source="bfcl:simple_python"),
)  # fmt: skip
BASE = "area(base=10, weights=[0.5, 2.0]"
# (candidate, rule): BFCL's checker passes each; strict refuses it by that rule (docs/tasks/tools.md)
STRICT_EXAMPLES = {
    'unit=""': "empty_string",  # "" is the answer's mark for "may be left out"
    'unit=" - "': "empty_string",  # (text that standardises to nothing)
    'sep=""': "punctuation_only",  # "," standardises to nothing as well
    "tags=[]": "empty_list",  # "" read as a list is []
    "sizes=[1, 2]": "item_types",  # ints for floats: BFCL checks the items only when the array is required
    'extra={"flag": False}': "bool_is_not_a_number",  # False == 0
}


@pytest.mark.parametrize("argument", sorted(STRICT_EXAMPLES))
def test_strict_rules_refuse_what_bfcl_passes_by_accident(argument: str) -> None:
    text = f"[{BASE}, {argument})]"
    assert bfcl_verdict(TRIANGLE_TASK, parse_calls(text) or [], "fc") is True  # BFCL's own checker passes it
    assert check_calls(parse_calls(text), TRIANGLE)[0]  # bfcl, the test's default
    assert check_calls(parse_calls(text), {**TRIANGLE, "rules": "bfcl"})[0]
    ok, why = check_calls(parse_calls(text), TRIANGLE, "strict")
    assert not ok and f"strict rule {STRICT_EXAMPLES[argument]}:" in why, why
    assert not check_calls(parse_calls(text), {**TRIANGLE, "rules": "strict"})[0]


def test_both_rules_take_what_is_right_and_refuse_what_is_wrong() -> None:
    good = [
        f"[{BASE})]", f"[{BASE}, unit='UNITS')]", f"[{BASE}, sep=',')]",
        f"[{BASE}, label='')]",  # "" is the declared default: giving it is leaving it out
        f"[{BASE}, sizes=[1.0, 2.0], tags=['A'])]", f"[{BASE}, extra={{'flag': 0, 'note': 'x'}})]",
    ]  # fmt: skip
    bad = [
        "[area(base=10, weights=[0.5, 2])]",  # ints in a required array of floats: BFCL checks these
        f"[{BASE}, unit='cm')]", f"[{BASE}, extra={{'flag': 0, 'other': 1}})]", f"[{BASE}, tags='a')]",
        f"[{BASE}, base2=1)]", "[area(weights=[0.5, 2.0])]",
    ]  # fmt: skip
    assert [bfcl_verdict(TRIANGLE_TASK, parse_calls(t) or [], "fc") for t in good + bad] == [True] * 6 + [False] * 6
    for rules in RULES:
        assert all(check_calls(parse_calls(t), TRIANGLE, rules)[0] for t in good), rules
        assert not any(check_calls(parse_calls(t), TRIANGLE, rules)[0] for t in bad), rules


def test_bfcl_rules_keep_bfcls_own_reading_of_its_answers() -> None:
    """Quirks BFCL's checker has that both rules keep (they are how its answers are meant)."""
    variable = {"calls": [{"f": {"data": ["my_frame"]}}], "schemas": {"f": {"properties": {"data": {"type": "dict"}}}}}
    assert ok("[f(data='my_frame')]", variable)  # the answer names a variable: its text is taken ...
    assert not ok("[f(data='MY_FRAME')]", variable)  # ... compared exactly
    assert not ok("[f(data={'a': 1})]", variable)
    first_type = {"calls": [{"f": {"n": [5, "five"]}}], "schemas": {"f": {"properties": {"n": {"type": "integer"}}}}}
    assert ok("[f(n=5)]", first_type) and not ok("[f(n='five')]", first_type)  # its first value's type only
    tuple_arg = {"calls": [{"f": {"xy": [[1, 2]]}}], "schemas": {"f": {"properties": {"xy": {"type": "tuple",
                 "items": {"type": "integer"}}, "ab": {"type": "array", "items": {"type": "integer"}}}}}}  # fmt: skip
    assert ok("[f(xy=(1, 2))]", tuple_arg)  # a tuple for a tuple
    assert not ok("[f(xy=(1, 2), ab=(1,))]", {**tuple_arg, "calls": [{"f": {"xy": [[1, 2]], "ab": [[1]]}}]})


def test_unknown_rules_are_named_with_the_valid_ones() -> None:
    with pytest.raises(ValueError, match="unknown call rules 'lenient'; the rules are: bfcl, strict"):
        check_calls(parse_calls(f"[{BASE})]"), TRIANGLE, "lenient")
    with pytest.raises(ValueError, match="unknown call rules 'loose'"):
        check_calls(parse_calls(f"[{BASE})]"), {**TRIANGLE, "rules": "loose"})
    with pytest.raises(ValidationError, match="'task', 'bfcl' or 'strict'"):
        GradingConfig(call_rules="lenient")


async def test_grading_config_opts_into_strict_rules(fast_sandbox: AsyncSandbox) -> None:
    [task] = [t for t in load_source("bfcl:simple_python") if t.id == "bfcl:simple_python_0"]
    assert task.tests[0].expected["rules"] == "bfcl"  # the bfcl: source's default
    answer = '[calculate_triangle_area(base=10, height=5, unit="")]'  # BFCL's answer: unit may be left out
    assert (await Grader(fast_sandbox).grade(task, answer)).value == 1.0
    assert (await Grader(fast_sandbox, GradingConfig(call_rules="bfcl")).grade(task, answer)).value == 1.0
    strict = await Grader(fast_sandbox, GradingConfig(call_rules="strict")).grade(task, answer)
    assert strict.value == 0.0 and "strict rule empty_string" in strict.cases[0].detail
    assert (
        await Grader(fast_sandbox, GradingConfig(call_rules="strict")).grade(task, task.reference or "")
    ).value == 1.0


def test_the_audit_lists_malformed_answers() -> None:
    """Every BFCL single-turn task known to be unverifiable is found by the audit's answer check,
    and no other task of the categories that have any."""
    found = {}
    for category in ("live_simple", "live_multiple", "simple_java"):
        found.update({t.id: why for t in load_source(f"bfcl:{category}?all=1") if (why := malformed_answer(t))})
        assert set(known_unverifiable(f"bfcl:{category}")) <= set(found)
    assert sorted(found) == [
        "bfcl:live_multiple_507-149-4", "bfcl:live_multiple_862-181-3", "bfcl:live_multiple_964-207-0",
        "bfcl:live_simple_106-63-0", "bfcl:live_simple_112-68-0",
        "bfcl:simple_java_36", "bfcl:simple_java_64", "bfcl:simple_java_65",
    ]  # fmt: skip
    assert "'epoch_millis' are not a list" in found["bfcl:simple_java_64"][0]
    assert "fails BFCL's checker" in found["bfcl:simple_java_36"][0]
    assert "declares no such parameter" in found["bfcl:live_multiple_862-181-3"][0]
    assert malformed_answer(TRIANGLE_TASK) == []
    broken = {"calls": [{"area": {"base": [""], "unit": "cm", "depth": [1], "extra": [{"flag": 0}]}}],
              "schemas": TRIANGLE["schemas"]}  # fmt: skip
    problems = malformed_answer(TRIANGLE_TASK.model_copy(update={"tests": [TestCase(expected=broken)]}))
    assert [p.split(": ", 1)[0] for p in problems] == ["area.base", "area.unit", "area.depth", "area.extra['flag']"]
