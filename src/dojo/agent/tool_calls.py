"""Tool calls written in text, Hermes style (what Qwen and many open models emit):

    <tool_call>
    {"name": "run_code", "arguments": {"code": "print(1)"}}
    </tool_call>

Used by the agent when a server returns text instead of parsed tool calls, and by dojo's own
policy server to return OpenAI ``tool_calls``.
"""

from __future__ import annotations

import json
import re

from dojo.agent.policy import ToolCall
from dojo.tasks.values import untrusted_json

_TOOL_CALL = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.DOTALL)  # (stripped after: \s* both
# sides of a lazy group was quadratic on a run of spaces, 30,000 held the event loop 14.5 s)


def parse_tool_calls(text: str) -> list[ToolCall]:
    """Every well-formed ``<tool_call>`` in ``text``; a malformed one becomes a call named
    ``invalid`` whose ``error`` argument says what was wrong (the agent reports it back)."""
    calls: list[ToolCall] = []
    for i, m in enumerate(_TOOL_CALL.finditer(text)):
        body = m.group(1).strip()
        if not body:
            continue
        try:
            obj = untrusted_json(body)
        except ValueError as e:
            calls.append(ToolCall(id=f"call_{i}", name="invalid", arguments={"error": f"tool call is not JSON: {e}"}))
            continue
        if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
            calls.append(
                ToolCall(
                    id=f"call_{i}", name="invalid", arguments={"error": 'expected {"name": ..., "arguments": {...}}'}
                )
            )
            continue
        args = obj.get("arguments", obj.get("parameters", {}))
        if isinstance(args, str):
            try:
                args = untrusted_json(args)
            except ValueError:
                args = None
        if not isinstance(args, dict):
            calls.append(
                ToolCall(id=f"call_{i}", name="invalid", arguments={"error": "arguments must be a JSON object"})
            )
            continue
        calls.append(ToolCall(id=f"call_{i}", name=obj["name"], arguments=args))
    return calls


def without_tool_calls(text: str) -> str:
    """A reply's text without its ``<tool_call>`` blocks: its content where the calls travel as
    ``tool_calls`` (as vLLM's parser returns it). A chat template renders ``tool_calls`` after the
    content, so a content that kept them had shown the model each of its calls twice."""
    return _TOOL_CALL.sub("", text).strip()


def format_tool_call(call: ToolCall) -> str:
    """The text form of a call (for rendering a conversation back into a prompt)."""
    return "<tool_call>\n" + json.dumps({"name": call.name, "arguments": call.arguments}) + "\n</tool_call>"
