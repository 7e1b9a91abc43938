"""tools tasks: calls read from a completion and checked by BFCL's rules, outside any sandbox; the
bfcl: source; the ways a model might be paid for calls it did not get right."""

from __future__ import annotations

import pytest

from dojo.rewards import Grader
from dojo.rewards.calls import check_calls, parse_calls
from dojo.sandbox import AsyncSandbox
from dojo.tasks import load_source
from dojo.tasks.bfcl import CATEGORIES
from dojo.tasks.model import Task, TestCase
from dojo.tasks.sources import known_unverifiable

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


def ok(text: str, expected: dict[str, object] = EXPECTED) -> bool:
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
    # reads every item as text, so no answer can meet them (left out of the source unless all=1)
    assert failing == ([] if category == "simple_javascript" else ["bfcl:simple_java_36", "bfcl:simple_java_65"])
    assert sorted(known_unverifiable(f"bfcl:{category}")) == failing
    assert all(t.tools[0]["function"]["parameters"]["type"] == "object" for t in tasks)
