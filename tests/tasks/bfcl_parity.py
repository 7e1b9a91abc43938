"""dojo's grading of BFCL's single-turn tasks next to BFCL's own ``ast_checker``, on candidates
made from each task's possible answer (never by a model): the gold in three forms, each other
allowed value, an optional argument given as ``""`` or ``[]``, a wrong value, a required argument
left out, an extra argument, a wrong name, type changes (an int for a float and back, text for a
number, a bool for a number inside a dict, ints in an array of floats, one item for a list, JSON
where Java/JavaScript source belongs), parallel calls reversed, one dropped, one twice.

BFCL's checker is imported from the ``bfcl-eval`` wheel's files: its ``model_config`` (which imports
every model handler, and with them LLM clients this venv does not have) is replaced in
``sys.modules`` by the one thing the checker reads from it, whether a model's function names come
with ``.`` turned into ``_`` (``fc``: the names dojo offers) or as BFCL writes them (``prompt``).
Used by ``tests/tasks/test_bfcl_parity.py`` and ``bench/bfcl_single_turn.py``.
"""

from __future__ import annotations

import copy
import json
import sys
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from dojo.rewards.graders import grade_tools_task
from dojo.tasks.bfcl import CATEGORIES, LANGUAGES, source_literal
from dojo.tasks.model import Task, tool_name

AST_CATEGORIES = tuple(c for c in CATEGORIES if "relevance" not in c)  # the ten the ast_checker grades
Call = tuple[str, dict[str, Any]]


@dataclass(frozen=True)
class _ModelConfig:
    underscore_to_dot: bool


def bfcl_checker() -> Callable[..., dict[str, Any]]:
    """BFCL's ``ast_checker``, imported with a stand-in for its ``model_config``."""
    name = "bfcl_eval.constants.model_config"
    if name not in sys.modules:
        stub = types.ModuleType(name)
        stub.MODEL_CONFIG_MAPPING = {"fc": _ModelConfig(True), "prompt": _ModelConfig(False)}  # type: ignore[attr-defined]
        sys.modules[name] = stub
    from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker  # type: ignore[import-untyped]

    return ast_checker  # type: ignore[no-any-return]


def bfcl_verdict(task: Task, calls: list[Call], model: str) -> bool | str:
    """BFCL's verdict on ``calls`` (as its function-calling handler decodes them: JSON arguments),
    or the name of the exception its checker raised (its runner does not catch them)."""
    from bfcl_eval.constants.enums import Language  # type: ignore[import-untyped]

    expected = task.tests[0].expected
    functions = [{"name": n, "parameters": p} for n, p in expected["schemas"].items()]
    category = task.metadata.source.removeprefix("bfcl:")
    language = Language(LANGUAGES.get(category, "python"))
    output = [{n: json.loads(json.dumps(args))} for n, args in calls]
    try:
        return bool(bfcl_checker()(functions, output, expected["calls"], language, category, model)["valid"])
    except Exception as e:  # (BFCL's checker raises where its data or the output surprises it)
        return type(e).__name__


def dojo_verdict(task: Task, calls: list[Call], rules: str) -> tuple[bool, str]:
    """dojo's verdict on the same calls, written as dojo asks for them (``<tool_call>`` blocks)."""
    text = "\n".join(f"<tool_call>{json.dumps({'name': n, 'arguments': a})}</tool_call>" for n, a in calls)
    case = grade_tools_task(task, text, rules).cases[0]
    return case.passed, case.detail


def _changed(value: Any) -> Any:
    """A value of the same type that no answer lists (almost surely)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 7919
    if isinstance(value, float):
        return value * 2 + 0.5
    if isinstance(value, str):
        return value + " zq"
    if isinstance(value, list):
        return [*value, value[0]] if value else ["zq"]
    if isinstance(value, dict):
        return {**value, "zq": 1}
    return "zq"


def _first(options: Any) -> tuple[bool, Any]:
    """(has a value, the first allowed value that is not ``""``)."""
    given = [o for o in options if o != ""] if isinstance(options, list) else [options]
    return (True, given[0]) if given else (False, None)


def _gold(answer: dict[str, Any], schema: dict[str, Any], optional: bool) -> dict[str, Any]:
    """Each parameter's first allowed value; ``optional``: also those that may be left out."""
    required = set(schema.get("required", []))
    out = {}
    for param, options in answer.items():
        has, value = _first(options)
        marked = isinstance(options, list) and "" in options
        if has and (param in required or optional or not marked or options[0] != ""):
            out[param] = copy.deepcopy(value)
    return out


def _type_changes(value: Any, spec: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    kind = spec.get("type")
    if kind == "float" and isinstance(value, float) and value.is_integer():
        yield "int_for_float", int(value)
    if kind == "integer" and isinstance(value, int) and not isinstance(value, bool):
        yield "float_for_int", float(value)
        yield "text_for_int", str(value)
    if kind in ("float", "integer") and isinstance(value, (int, float)) and not isinstance(value, bool):
        yield "bool_for_number", True
    if kind == "boolean" and isinstance(value, bool):
        yield "int_for_bool", int(value)
    if kind == "array" and isinstance(value, list):
        if value:
            yield "one_item_for_list", value[0]
        if value and all(isinstance(v, float) and v.is_integer() for v in value):
            yield "ints_in_float_array", [int(v) for v in value]
    if kind == "dict" and isinstance(value, dict):
        for key, v in value.items():
            if isinstance(v, list) and v and isinstance(v[0], bool):
                yield "number_for_bool_in_dict", {**value, key: int(v[0])}
            elif isinstance(v, list) and v and isinstance(v[0], int) and not isinstance(v[0], bool):
                yield "bool_for_number_in_dict", {**value, key: bool(v[0])}
    if kind == "string" and isinstance(value, str):
        yield "padded_text", f"  {value.upper()}. "


def _flat(value: Any) -> Any:
    """A nested allowed value (a dict of allowed-value lists) as one value: each key's first."""
    if isinstance(value, dict):
        out = {}
        for key, options in value.items():
            has, first = _first(options)
            if has:
                out[key] = _flat(first)
        return out
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return [_flat(v) for v in value]
    return value


def _variants(answer: dict[str, Any], schema: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(kind, arguments) for one expected call: BFCL's value forms (dicts of allowed lists) kept."""
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    gold = _gold(answer, schema, optional=False)
    full = _gold(answer, schema, optional=True)
    yield "gold", gold
    yield "gold_with_optionals", full
    for param, options in answer.items():
        spec = properties.get(param, {})
        alternatives = [o for o in options if o != ""][1:3] if isinstance(options, list) else []
        for alt in alternatives:
            yield "other_allowed_value", {**gold, param: alt}
        marked = isinstance(options, list) and "" in options
        if marked:
            yield "empty_string_for_optional", {**gold, param: ""}
            if spec.get("type") in ("array", "ArrayList", "Array"):
                yield "empty_list_for_optional", {**gold, param: []}
            if param in gold:
                yield "optional_left_out", {k: v for k, v in gold.items() if k != param}
        elif param not in required and param in gold:
            yield "unmarked_left_out", {k: v for k, v in gold.items() if k != param}
        if param in full:  # (an optional one given, too)
            yield "wrong_value", {**gold, param: _changed(_flat(full[param]))}
            for kind, value in _type_changes(full[param], spec):
                yield kind, {**gold, param: value}
    if required:
        yield "required_left_out", {k: v for k, v in gold.items() if k != required[0]}
    yield "unknown_parameter", {**gold, "zq_extra": 1}
    if extra := [p for p in properties if p not in answer]:
        yield "parameter_not_in_answer", {**gold, extra[0]: "zq"}


def _written(args: dict[str, Any], schema: dict[str, Any], language: str) -> dict[str, Any]:
    """Arguments as the candidate writes them: plain values (an answer's dict of allowed lists as
    its first values), or Java/JavaScript source text."""
    out = {k: _flat(v) for k, v in args.items()}
    if language == "python":
        return out
    properties = schema.get("properties", {})
    written = {}
    for k, v in out.items():
        try:
            written[k] = source_literal(v, properties.get(k, {}), language)
        except (TypeError, AttributeError, KeyError):  # (a wrong type the writer has no form for: as text)
            written[k] = str(v)
    return written


def candidates(task: Task) -> Iterator[tuple[str, list[Call], str]]:
    """(kind, calls, BFCL model config) for one AST task; the calls name functions as dojo offers them."""
    expected = task.tests[0].expected
    schemas: dict[str, Any] = expected["schemas"]
    language = str(expected.get("language", "python"))
    wanted: list[dict[str, Any]] = expected["calls"]
    golds = []
    for want in wanted:
        [(name, answer)] = want.items()
        golds.append((tool_name(name), _written(_gold(answer, schemas[name], False), schemas[name], language)))
    for i, want in enumerate(wanted):
        [(name, answer)] = want.items()
        for kind, args in _variants(answer, schemas[name]):
            calls = list(golds)
            calls[i] = (tool_name(name), _written(args, schemas[name], language))
            yield kind, calls, "fc"
            if language != "python" and kind == "gold":
                yield "json_for_source", [*golds[:i], (tool_name(name), _flat(args)), *golds[i + 1 :]], "fc"
        if i == 0:
            yield "wrong_name", [(tool_name(name) + "_zq", golds[0][1]), *golds[1:]], "fc"
    if any(tool_name(n) != n for w in wanted for n in w):  # every name as BFCL writes it
        yield "dotted_names", [(n, args) for w, (_, args) in zip(wanted, golds, strict=True) for n in w], "prompt"
    if len(golds) > 1:
        yield "calls_reversed", golds[::-1], "fc"
        yield "call_dropped", golds[:-1], "fc"
    yield "call_twice", [*golds, golds[0]], "fc"


def strict_rule(why: str) -> str:
    """The strict rule a failure names (``strict rule <name>: ...``), or ``""``."""
    _, found, rest = why.partition("strict rule ")
    return rest.split(":", 1)[0] if found else ""
