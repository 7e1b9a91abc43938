from __future__ import annotations

from dojo.agent.policy import ToolCall
from dojo.agent.tool_calls import format_tool_call, parse_tool_calls


def test_hermes_tool_calls_are_parsed() -> None:
    text = (
        "I will test it.\n<tool_call>\n"
        '{"name": "run_code", "arguments": {"code": "print(1)"}}\n</tool_call>\n'
        '<tool_call>{"name": "submit", "arguments": "{\\"code\\": \\"x\\"}"}</tool_call>'
    )
    calls = parse_tool_calls(text)
    assert [(c.name, c.arguments) for c in calls] == [("run_code", {"code": "print(1)"}), ("submit", {"code": "x"})]


def test_malformed_calls_become_errors_the_model_sees() -> None:
    assert parse_tool_calls("no calls here") == []
    bad = parse_tool_calls("<tool_call>{not json</tool_call><tool_call>[1]</tool_call>")
    assert [c.name for c in bad] == ["invalid", "invalid"]
    assert "not JSON" in bad[0].arguments["error"] and "expected" in bad[1].arguments["error"]
    unclosed = parse_tool_calls('<tool_call>{"name": "read_file", "arguments": {"path": "a"}}')
    assert unclosed[0].name == "read_file"  # cut off by max tokens after a complete JSON object


def test_format_round_trips() -> None:
    call = ToolCall(name="write_file", arguments={"path": "a.txt", "content": "hi"})
    (parsed,) = parse_tool_calls(format_tool_call(call))
    assert (parsed.name, parsed.arguments) == (call.name, call.arguments)
