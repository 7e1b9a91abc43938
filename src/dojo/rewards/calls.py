"""Grading a ``tools`` task: the calls a candidate makes, read from its text and checked here
against allowed-value answers (BFCL's answer form), with BFCL's rules.

A candidate's calls come as ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks
(what an agent's native tool calls are written as), a JSON list of such objects, or Python call
syntax ``[get_weather(city="Paris"), add(a=1, b=2)]`` (BFCL's prompting format).

The rules (BFCL's ``ast_checker``, for Python-typed schemas): the function names must match; every
required parameter must be given and no parameter outside the schema or the answer; each value must
be one of the allowed ones, where strings compare without spaces, ``,./-_*^`` and case, an int is
accepted for a float, lists compare element by element (strings standardised) and dicts key by key;
a parameter left out must have ``""`` among its allowed values. Several expected calls match the
candidate's in any order, one to one, with the same count. ``{"no_call": true}``: the candidate must
make no call (none of the tools fits the request); ``{"any_call": true}``: it must make one.

Java and JavaScript tasks (``"language": "java" | "javascript"`` in the test) take every argument as
a string of that language's source (``"new HashMap<String, String>() {{ put(\"k\", \"v\"); }}"``,
``"[1, 2]"``, ``"true"``); each is converted to a value by BFCL's own type converters (from the
``bfcl-eval`` wheel: pure parsing, nothing is evaluated) for the parameter's declared type, then
checked by the rules above.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from dojo.tasks.model import tool_name

Call = tuple[str, dict[str, Any]]
TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)
_STANDARDISE = re.compile(r"[ ,./\-_*^]")
PYTHON_TYPES: dict[str, type] = {
    "string": str, "integer": int, "float": float, "number": float, "boolean": bool, "array": list,
    "tuple": list, "dict": dict, "object": dict, "any": str,
}  # fmt: skip


def _python_calls(text: str) -> list[Call] | None:
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError:
        return None
    nodes = tree.body.elts if isinstance(tree.body, (ast.List, ast.Tuple)) else [tree.body]
    calls: list[Call] = []
    for node in nodes:
        if not isinstance(node, ast.Call) or node.args:
            return None
        name = ast.unparse(node.func)
        try:
            args = {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords if kw.arg}
        except (ValueError, SyntaxError, TypeError):
            return None
        calls.append((name, args))
    return calls


def _json_call(obj: Any) -> Call | None:
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return None
    args = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            return None
    return (obj["name"], args) if isinstance(args, dict) else None


def parse_calls(text: str) -> list[Call] | None:
    """The calls ``text`` makes, or None when it holds none that can be read (prose, a refusal)."""
    blocks = TOOL_CALL.findall(text)
    if blocks:
        calls = []
        for block in blocks:
            try:
                call = _json_call(json.loads(block))
            except ValueError:
                call = None
            if call is None:
                return None
            calls.append(call)
        return calls
    body = text.strip()
    fenced = re.findall(r"```(?:\w+)?\n(.*?)```", body, re.DOTALL)
    if fenced:
        body = fenced[-1].strip()
    if body.startswith(("[", "{")):
        try:
            data = json.loads(body)
        except ValueError:
            data = None
        if data is not None:
            items = data if isinstance(data, list) else [data]
            parsed = [_json_call(x) for x in items]
            if items and all(p is not None for p in parsed):
                return [p for p in parsed if p is not None]
    python = _python_calls(body)
    return python if python else None


def standardise(value: Any) -> Any:
    if isinstance(value, str):
        return _STANDARDISE.sub("", value).lower().replace("'", '"')
    if isinstance(value, (list, tuple)):
        return [standardise(v) for v in value]
    if isinstance(value, dict):
        return {k: standardise(v) for k, v in value.items()}
    return value


def _value_ok(value: Any, allowed: list[Any], type_name: str, types: dict[str, type] | None = None) -> bool:
    expected = (types or PYTHON_TYPES).get(type_name)
    if expected is float and type(value) is int:
        value = float(value)
    if isinstance(value, tuple):
        value = list(value)
    candidates = [a for a in allowed if a != ""]
    if expected is not None and type(value) is not expected and not any(type(value) is type(a) for a in candidates):
        return False
    if type(value) is float:  # an int allowed value matches the same float
        candidates = [float(a) if type(a) is int else a for a in candidates]
    if isinstance(value, dict):
        return any(_dict_ok(value, a) for a in candidates if isinstance(a, dict))
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):  # a list of dicts
        return any(
            isinstance(a, list) and len(a) == len(value) and all(_dict_ok(v, d) for v, d in zip(value, a, strict=True))
            for a in candidates
        )
    return standardise(value) in [standardise(a) for a in candidates]


def _dict_ok(value: Any, allowed: Any) -> bool:
    """A dict value against one allowed dict (each key: a list of allowed values, ``""`` = may be left out)."""
    if not isinstance(value, dict) or not isinstance(allowed, dict):
        return False
    for key, v in value.items():
        options = allowed.get(key)
        options = options if isinstance(options, list) else [options]
        if key not in allowed or standardise(v) not in [standardise(a) for a in options]:
            return False
    return all(key in value or (isinstance(o, list) and "" in o) for key, o in allowed.items())


def _source_value(value: Any, spec: dict[str, Any], language: str) -> tuple[Any, dict[str, type]]:
    """A Java or JavaScript argument (source text) as the value it writes, by BFCL's converters; and
    the language's types by name. ValueError when it is not text."""
    from bfcl_eval.constants.type_mappings import (  # type: ignore[import-untyped]
        JAVA_TYPE_CONVERSION,
        JS_TYPE_CONVERSION,
    )
    from bfcl_eval.eval_checker.ast_eval.type_convertor.java_type_converter import (  # type: ignore[import-untyped]
        java_type_converter,
    )
    from bfcl_eval.eval_checker.ast_eval.type_convertor.js_type_converter import (  # type: ignore[import-untyped]
        js_type_converter,
    )

    if not isinstance(value, str):
        raise ValueError(f"a {language} argument is source text (a string), not {type(value).__name__}")
    type_name = str(spec.get("type", "any"))
    nested = spec.get("items", {}).get("type") if type_name in ("Array", "ArrayList", "array") else None
    convert, types = (
        (java_type_converter, JAVA_TYPE_CONVERSION) if language == "java" else (js_type_converter, JS_TYPE_CONVERSION)
    )
    try:
        return (convert(value, type_name, nested) if nested else convert(value, type_name)), types
    except (ValueError, NotImplementedError, IndexError, KeyError) as e:
        raise ValueError(f"cannot read {value!r} as {language} {type_name}: {e}") from None


def check_call(
    call: Call, expected: dict[str, dict[str, list[Any]]], schemas: dict[str, Any], language: str = "python"
) -> str | None:
    """None when ``call`` is the expected one (BFCL's rules); else why not."""
    [(name, answer)] = expected.items()
    got_name, args = call
    if got_name not in (name, tool_name(name)):
        return f"called {got_name}, not {name}"
    params = schemas.get(name, {}).get("parameters", {})
    properties = params.get("properties", {})
    for required in params.get("required", []):
        if required not in args:
            return f"{name}: missing required parameter {required!r}"
    for param, value in args.items():
        if param not in properties or param not in answer:
            return f"{name}: unexpected parameter {param!r}"
        types: dict[str, type] | None = None
        if language != "python":
            try:
                value, types = _source_value(value, properties[param], language)
            except ValueError as e:
                return f"{name}: {e}"
        if not _value_ok(value, answer[param], str(properties[param].get("type", "any")), types):
            return f"{name}: wrong value for {param!r}"
    for param, allowed in answer.items():
        if param not in args and "" not in allowed:
            return f"{name}: parameter {param!r} left out"
    return None


def check_calls(calls: list[Call] | None, expected: dict[str, Any]) -> tuple[bool, str]:
    """Whether the candidate's ``calls`` meet ``expected`` (a tools task's test: ``calls``, the
    allowed values; ``schemas``, each function's parameters with the source's own types), and why
    not."""
    if expected.get("no_call"):
        return (not calls), "" if not calls else "a call was made, but none of the tools fits the request"
    if expected.get("any_call"):
        return bool(calls), "" if calls else "no call was made"
    if not calls:
        return False, "no call could be read from the answer"
    wanted: list[dict[str, Any]] = expected.get("calls", [])
    if len(calls) != len(wanted):
        return False, f"{len(calls)} call(s) made, {len(wanted)} expected"
    schemas = {name: {"parameters": params} for name, params in expected.get("schemas", {}).items()}
    free = list(range(len(calls)))
    for want in wanted:
        errors = []
        for i in free:
            why = check_call(calls[i], want, schemas, str(expected.get("language", "python")))
            if why is None:
                free.remove(i)
                break
            errors.append(why)
        else:
            return False, errors[0] if errors else "no call matches"
    return True, ""
