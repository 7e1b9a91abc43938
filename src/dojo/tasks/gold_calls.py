"""The gold calls of a ``tools`` task with a simulated API (``Task.api``): Python call text per
turn (BFCL's ``cd(folder='x')``), read as data (literal arguments, never evaluated), and the same
calls written as a candidate's answer (the task's reference)."""

from __future__ import annotations

import ast
import functools
import json
from typing import Any

from dojo.tasks.model import Task


def gold_calls(task: Task) -> list[list[str]]:
    """The gold calls of each turn (Python call text), from the task's test."""
    turns = task.tests[0].expected.get("turns") if task.tests else None
    return [list(t) for t in turns] if isinstance(turns, list) else []


@functools.lru_cache(maxsize=65536)
def parse_call_text(text: str) -> dict[str, Any]:
    """``cd(folder='x')`` -> ``{"name": "cd", "args": [], "arguments": {"folder": "x"}}``; literal
    arguments only (a gold call is data, never evaluated). ValueError when it is not one call."""
    try:
        node = ast.parse(text.strip(), mode="eval").body
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
            raise ValueError("not a call of a function by name")
        args = [ast.literal_eval(a) for a in node.args]
        kwargs = {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords if kw.arg}
    except (SyntaxError, ValueError, TypeError) as e:
        raise ValueError(f"{text!r} is not a call with literal arguments: {e}") from None
    return {"name": node.func.id, "args": args, "arguments": kwargs}


def gold_turns(task: Task) -> list[list[dict[str, Any]]]:
    """The gold calls as the driver takes them; ``InvalidTask``-worthy ValueError names the task."""
    try:
        return [[parse_call_text(c) for c in turn] for turn in gold_calls(task)]
    except ValueError as e:
        raise ValueError(f"task {task.id}: a gold call cannot be read: {e}") from None


def api_reference(task: Task) -> str:
    """The gold calls as a candidate's answer (one step per turn)."""
    return json.dumps({"turns": [[[{"name": c["name"], "arguments": keyword_arguments(task, c)} for c in turn]]
                                 for turn in gold_turns(task)]})  # fmt: skip


def keyword_arguments(task: Task, call: dict[str, Any]) -> dict[str, Any]:
    """A gold call's positional arguments named by the tool's schema (its properties' order)."""
    if not call["args"]:
        return dict(call["arguments"])
    schema = next((t["function"] for t in task.tools if t["function"]["name"] == call["name"]), None)
    names = list((schema or {}).get("parameters", {}).get("properties", {}))
    if len(names) < len(call["args"]):
        raise ValueError(f"task {task.id}: {call['name']} takes more positional arguments than its schema names")
    return {**dict(zip(names, call["args"], strict=False)), **call["arguments"]}
