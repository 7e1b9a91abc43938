"""Grading a ``tools`` task: the calls a candidate makes, read from its text and checked here
against allowed-value answers (BFCL's answer form), by one of two sets of rules.

A candidate's calls come as ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks
(what an agent's native tool calls are written as), a JSON list of such objects, or Python call
syntax ``[get_weather(city="Paris"), add(a=1, b=2)]`` (BFCL's prompting format).

``bfcl`` rules (the default): BFCL's own ``ast_checker`` (``bfcl-eval==2026.3.23``), verdict for
verdict, its quirks included, so that a leaderboard number carries over. The names must match (a
dotted name may come in OpenAI's form, ``math_hypot``); every required parameter must be given and
none outside the schema or the answer; the value's type must be the declared one (an int is taken
for a float; a value of the answer's own type when the answer names a variable, then compared
exactly); strings compare without spaces, ``,./-_*^`` and case, lists element by element (their
strings standardised), dicts key by key, lists of dicts in order; a parameter left out must have
``""`` among its allowed values. Several expected calls match the candidate's in any order, one to
one, with the same count. ``tests/tasks/test_bfcl_parity.py`` checks the verdicts against BFCL's
checker itself on candidates made from every answer of the ten single-turn categories.

``strict`` rules: the same, less five things BFCL's checker passes by accident of how it reads its
answer files (``STRICT_RULES``, each named in the reason a candidate fails): ``""``, BFCL's mark for
"may be left out", taken as a value (``unit=""``); an allowed text of only punctuation (``","``)
that any such text meets; ``[]`` for a list that may be left out; an optional array's items left
unchecked; ``True`` for ``1`` inside a dict. Strict never passes a candidate that ``bfcl`` fails.

``{"no_call": true}``: the candidate must make no call (none of the tools fits the request);
``{"any_call": true}``: it must make one. Which rules grade a test: ``GradingConfig.call_rules``,
else the test's ``rules`` (``bfcl:`` tasks say ``bfcl``), else ``bfcl``.

Java and JavaScript tasks (``"language": "java" | "javascript"`` in the test) take every argument as
a string of that language's source (``"new HashMap<String, String>() {{ put(\"k\", \"v\"); }}"``,
``"[1, 2]"``, ``"true"``); each is converted to a value by BFCL's own type converters (from the
``bfcl-eval`` wheel: pure parsing, nothing is evaluated) for the parameter's declared type, then
checked by the rules above.
"""

from __future__ import annotations

import ast
import re
from typing import Any, cast

from dojo.tasks.model import tool_name
from dojo.tasks.values import untrusted_json

Call = tuple[str, dict[str, Any]]
RULES: tuple[str, ...] = ("bfcl", "strict")
TOOL_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)  # (a block is stripped after; see tool_calls)
_STANDARDISE = re.compile(r"[ ,./\-_*^]")
# BFCL's types (its ``PYTHON_TYPE_MAPPING``), and JSON Schema's two names that BFCL's data never uses
PYTHON_TYPES: dict[str, type] = {
    "string": str, "integer": int, "float": float, "boolean": bool, "array": list, "tuple": list, "dict": dict,
    "any": str, "number": float, "object": dict,
}  # fmt: skip
NESTED = {"python": ("array", "tuple")}  # the types whose items BFCL checks (one level deep); Java, JS:
NESTED_SOURCE = ("Array", "ArrayList", "array")
# What strict refuses that BFCL passes: rule -> why (each failure says its rule: ``strict rule <name>``)
STRICT_RULES: dict[str, str] = {
    "empty_string": '`""` is the answer\'s mark for "may be left out", not a value: an optional argument '
    'given as "" (or as text of only spaces and ,./-_*^) is not left out, unless "" is its declared default',
    "punctuation_only": 'an allowed text made only of spaces and ,./-_*^ (a delimiter ",") is compared as it is: '
    'BFCL\'s standardisation leaves nothing of it, so that any such text, "" included, passes',
    "empty_list": "an empty list is not the same as leaving an optional list out, unless [] is its declared default",
    "item_types": "an array's items have the declared item type also when the array may be left out "
    "(BFCL skips the check when the answer allows leaving it out)",
    "bool_is_not_a_number": "inside dicts and nested lists a boolean is not the number 1 or 0 (BFCL compares "
    "them with Python's ==, where True == 1)",
}


def _is_data(value: Any) -> bool:
    """Whether a literal is data a call's arguments can hold (what JSON can carry: a tuple is a
    list); a set, bytes, a complex number, ``...`` or a key that is not text are not."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    if isinstance(value, (list, tuple)):
        return all(_is_data(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_data(v) for k, v in value.items())
    return False


def _python_calls(text: str) -> list[Call] | None:
    """The calls of a Python-syntax answer, or None when it is not one. Nesting past the parser's
    depth is no answer either (``"-" * 3000 + "1"``, ~200 tokens, raised ``RecursionError`` out of
    the grade and stopped the whole rollout), nor is an argument that is no data (``x={1, 2}``,
    ``b'a'``, ``1j``: a TypeError where the calls are sent to a simulated API as JSON)."""
    try:
        tree = ast.parse(text.strip(), mode="eval")
        nodes = tree.body.elts if isinstance(tree.body, (ast.List, ast.Tuple)) else [tree.body]
        calls: list[Call] = []
        for node in nodes:
            if not isinstance(node, ast.Call) or node.args:
                return None
            name = ast.unparse(node.func)
            args = {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords if kw.arg}
            if not _is_data(args):
                return None
            calls.append((name, args))
    except (SyntaxError, ValueError, TypeError, RecursionError, MemoryError):
        return None
    return calls


def _json_call(obj: Any) -> Call | None:
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return None
    args = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(args, str):
        try:
            args = untrusted_json(args)
        except ValueError:
            return None
    return (obj["name"], args) if isinstance(args, dict) else None


def parse_calls(text: str) -> list[Call] | None:
    """The calls ``text`` makes, or None when it holds none that can be read (prose, a refusal)."""
    blocks = TOOL_CALL.findall(text[: text.rfind("</tool_call>") + len("</tool_call>")])  # (openers past the
    if blocks:  # last closer close nothing: searching them made a reply of many of them quadratic)
        calls = []
        for block in blocks:
            try:
                call = _json_call(untrusted_json(block))
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
            data = untrusted_json(body)
        except ValueError:
            data = None
        if data is not None:
            items = data if isinstance(data, list) else [data]
            parsed = [_json_call(x) for x in items]
            if items and all(p is not None for p in parsed):
                return [p for p in parsed if p is not None]
    python = _python_calls(body)
    return python if python else None


def _std(text: str) -> str:
    """BFCL's ``standardize_string``: no spaces or ``,./-_*^``, lower case, ``'`` as ``"``."""
    return _STANDARDISE.sub("", text).lower().replace("'", '"')


def _listed(options: Any) -> list[Any]:
    """``options`` iterated as BFCL iterates them (by index: a string where a list belongs is its
    characters, a number raises TypeError, a dict KeyError)."""
    return [options[j] for j in range(len(options))]


def _std_value(value: Any) -> Any:
    return _std(value) if type(value) is str else value


def _is_mark(value: Any) -> bool:
    """The answer's ``""``: the parameter (or dict key, or list) may be left out."""
    return type(value) is str and value == ""


def _same(value: Any, allowed: Any, strict: bool) -> bool:
    """``value == allowed`` (BFCL); strictly, a bool is not the number 1 or 0, at any depth."""
    if not strict:
        return bool(value == allowed)
    if type(value) is bool or type(allowed) is bool:
        return type(value) is type(allowed) and value == allowed
    if isinstance(value, (list, tuple)) and isinstance(allowed, (list, tuple)):
        return (
            type(value) is type(allowed)
            and len(value) == len(allowed)
            and all(_same(v, a, strict) for v, a in zip(value, allowed, strict=True))
        )
    if isinstance(value, dict) and isinstance(allowed, dict):
        return value.keys() == allowed.keys() and all(_same(value[k], allowed[k], strict) for k in value)
    return bool(value == allowed)


class _Match:
    """One parameter's matching under a set of rules: ``strict`` drops the ``""`` mark as a value
    (unless the declared default is that value) and records the rule that refused it."""

    def __init__(self, strict: bool) -> None:
        self.strict = strict
        self.unmet: str | None = None  # the strict rule that refused a match BFCL's rules make

    def mark(self, value: Any, spec: Any, rule: str) -> bool:
        """``value`` matches only the answer's ``""`` mark: BFCL takes it; strict only as the default."""
        if not self.strict or (isinstance(spec, dict) and "default" in spec and _same(value, spec["default"], True)):
            return True
        self.unmet = self.unmet or rule
        return False

    def typed(self, value: Any, allowed: list[Any], expected: type, nested: type | None) -> tuple[bool, bool]:
        """BFCL's ``type_checker``: (valid, the answer names a variable). The answer's type is that of
        its first allowed value that is not ``""``; where that is not the declared type the answer
        names a variable, and a value of the answer's type is taken (then compared exactly). Array
        items are checked against each allowed list, one level deep."""
        answer_type = next((type(a) for a in allowed if a != ""), None)
        variable = answer_type is not None and answer_type is not expected
        if type(value) is expected:
            if nested is None:
                return True, variable
            for item in allowed:  # BFCL: an allowed value that is not a list passes any items
                if _is_mark(item) and self.strict:
                    continue
                if type(item) is not list or all(self.typed(v, item, nested, None)[0] for v in cast(list[Any], value)):
                    return True, variable
            if not self.strict:
                return False, variable
            if any(_is_mark(a) for a in allowed) and any(not _is_mark(a) for a in allowed):
                self.unmet = self.unmet or "item_types"  # (BFCL passed it at the mark)
            return bool(allowed) and all(_is_mark(a) for a in allowed), variable
        return (True, True) if answer_type is not None and type(value) is answer_type else (False, False)

    def text(self, value: str, allowed: list[Any], spec: Any) -> bool:
        """BFCL's ``string_checker``: standardised text among the standardised allowed strings
        (strictly, an allowed text that standardises to nothing, such as ``","``, as it is)."""
        got = _std(value)
        texts = [a for a in _listed(allowed) if type(a) is str and not _is_mark(a)]
        if any(_std(a) == got and not (self.strict and got == "" and a != value) for a in texts):
            return True
        if self.strict and got == "" and any(_std(a) == "" for a in texts):
            self.unmet = self.unmet or "punctuation_only"
        return got == "" and any(_is_mark(a) for a in allowed) and self.mark(value, spec, "empty_string")

    def listed(self, value: list[Any], allowed: list[Any], spec: Any) -> bool:
        """BFCL's ``list_checker``: the list, its strings standardised, equal to one allowed list
        (``""`` iterated as a list is the empty list)."""
        got = [_std_value(v) for v in value]
        if any(_same(got, [_std_value(x) for x in _listed(a)], self.strict) for a in allowed if not _is_mark(a)):
            return True
        return not got and any(_is_mark(a) for a in allowed) and self.mark(value, spec, "empty_list")

    def mapping(self, value: dict[str, Any], alternatives: list[Any], spec: Any) -> bool:
        """BFCL's ``dict_checker``: every key of the value allowed by one alternative, with a value
        among that key's (standardised strings), and every key it leaves out marked ``""``."""
        properties = spec.get("properties", {}) if isinstance(spec, dict) else {}
        for alt in _listed(alternatives):
            if alt == "":
                continue
            ok = True
            for key, v in value.items():
                if key not in alt:
                    ok = False
                    break
                got, options = _std_value(v), _listed(alt[key])
                if any(_same(got, _std_value(o), self.strict) for o in options if not _is_mark(o)):
                    continue
                if not (
                    got == ""
                    and any(_is_mark(o) for o in options)
                    and self.mark(v, properties.get(key), "empty_string")
                ):
                    ok = False
                    break
            for key, options in alt.items():  # (BFCL runs this loop whatever the first found)
                if key not in value and "" not in options:
                    ok = False
                    break
            if ok:
                return True
        return False

    def mappings(self, value: list[Any], allowed: list[Any], spec: Any) -> bool:
        """BFCL's ``list_dict_checker``: as many dicts as one allowed list, each matching its own."""
        items = spec.get("items", {}) if isinstance(spec, dict) else {}
        for alt in allowed:
            if len(value) != len(alt):
                continue
            if _is_mark(alt):  # (the empty list against "")
                if self.mark(value, spec, "empty_list"):
                    return True
                continue
            if all(self.mapping(value[i], [alt[i]], items) for i in range(len(value))):
                return True
        return False


def _source_value(value: Any, type_name: str, nested: str | None, language: str) -> Any:
    """A Java or JavaScript argument (source text) as the value it writes, by BFCL's converters."""
    from bfcl_eval.eval_checker.ast_eval.type_convertor.java_type_converter import (  # type: ignore[import-untyped]
        java_type_converter,
    )
    from bfcl_eval.eval_checker.ast_eval.type_convertor.js_type_converter import (  # type: ignore[import-untyped]
        js_type_converter,
    )

    convert = java_type_converter if language == "java" else js_type_converter
    return convert(value, type_name, nested) if nested is not None else convert(value, type_name)


def _types(language: str) -> dict[str, type]:
    if language == "python":
        return PYTHON_TYPES
    from bfcl_eval.constants.type_mappings import (  # type: ignore[import-untyped]
        JAVA_TYPE_CONVERSION,
        JS_TYPE_CONVERSION,
    )

    return dict(JAVA_TYPE_CONVERSION if language == "java" else JS_TYPE_CONVERSION)


def _argument(
    param: str, value: Any, allowed: list[Any], spec: dict[str, Any], language: str, match: _Match
) -> str | None:
    """One argument against its allowed values (BFCL's ``simple_function_checker``, per parameter)."""
    types = _types(language)
    type_name = str(spec.get("type"))
    if type_name not in types:
        return f"{param!r} is declared {type_name!r}, a type BFCL's checker does not know ({', '.join(types)})"
    expected = types[type_name]
    nested_name = str(spec["items"]["type"]) if type_name in NESTED.get(language, NESTED_SOURCE) else None
    nested = types[nested_name] if nested_name is not None else None
    if language != "python":
        if type(value) is not str:
            return f"{param!r} is {language} source text (a string), not {type(value).__name__}"
        value = _source_value(value, type_name, nested_name, language)
    if type_name == "tuple" and type(value) is tuple:
        value = list(value)
    if language == "python" and type_name == "float" and type(value) is int:
        value = float(value)
    valid, variable = match.typed(value, allowed, expected, nested)
    if not valid:
        return f"{param!r} has the wrong type: {type(value).__name__} {value!r}, declared {type_name}"
    if variable or expected not in (dict, list, str):  # compared as they are
        ok = any(_same(value, a, match.strict) for a in allowed if not _is_mark(a)) or (
            _is_mark(value) and any(_is_mark(a) for a in allowed) and match.mark(value, spec, "empty_string")
        )
    elif expected is dict:
        ok = match.mapping(value, allowed, spec)
    elif expected is list and nested is dict:
        ok = match.mappings(value, allowed, spec)
    elif expected is str:
        ok = match.text(value, allowed, spec)
    else:
        ok = match.listed(value, allowed, spec)
    return None if ok else f"wrong value for {param!r}: {value!r}; allowed: {allowed!r}"


def _check(
    call: Call, name: str, answer: dict[str, Any], schema: dict[str, Any], language: str, strict: bool
) -> str | None:
    """BFCL's ``simple_function_checker``: the name, the required parameters, each argument, and
    the parameters left out; None, or why not (a strict refusal names its rule)."""
    got_name, args = call
    if got_name not in (name, tool_name(name)):
        return f"called {got_name}, not {name}"
    properties = schema.get("properties", {})
    for required in schema.get("required", []):
        if required not in args:
            return f"{name}: missing required parameter {required!r}"
    for param, value in args.items():
        if param not in properties or param not in answer:
            return f"{name}: unexpected parameter {param!r}"
        match = _Match(strict)
        try:
            why = _argument(param, value, answer[param], properties[param], language, match)
        except (KeyError, TypeError, AttributeError, IndexError, ValueError, NotImplementedError) as e:
            why = f"BFCL's checker cannot check {param!r} against this answer ({type(e).__name__}: {e})"
        if why is not None:
            return (
                f"{name}: {why}"
                if match.unmet is None
                else f"{name}: {param!r}: strict rule {match.unmet}: {STRICT_RULES[match.unmet]}"
            )
    for param, allowed in answer.items():
        if param not in args and not (isinstance(allowed, (list, str)) and "" in allowed):  # (str: BFCL's `in`)
            return f"{name}: parameter {param!r} left out"
    return None


def check_call(
    call: Call,
    expected: dict[str, dict[str, list[Any]]],
    schemas: dict[str, Any],
    language: str = "python",
    rules: str = "bfcl",
) -> str | None:
    """None when ``call`` is the expected one by ``rules`` (``bfcl`` or ``strict``); else why not."""
    [(name, answer)] = expected.items()
    if name not in schemas:
        return f"the task has no schema for {name}"
    schema = schemas[name].get("parameters", {})
    why = _check(call, name, answer, schema, language, strict=False)
    if why is not None or rules == "bfcl":
        return why
    why = _check(call, name, answer, schema, language, strict=True)
    if why is not None and "strict rule" not in why:  # (all else is as BFCL's rules: only _same differs)
        why = f"{why}: strict rule bool_is_not_a_number: {STRICT_RULES['bool_is_not_a_number']}"
    return why


def call_rules(expected: dict[str, Any], rules: str | None = None) -> str:
    """The rules a test is graded by: ``rules`` when given (``GradingConfig.call_rules``), else the
    test's own ``rules``, else ``bfcl``. ValueError naming the valid ones for any other."""
    chosen = rules if rules is not None else expected.get("rules", "bfcl")
    if chosen not in RULES:
        raise ValueError(f"unknown call rules {chosen!r}; the rules are: {', '.join(RULES)}")
    return str(chosen)


def _matched(
    calls: list[Call], wanted: list[dict[str, Any]], schemas: dict[str, Any], language: str, rules: str
) -> tuple[list[int] | None, str]:
    """Which call meets each expected one (BFCL's ``parallel_function_checker_no_order``: for each
    expected call in turn, the first call not yet taken that meets it), or None and why not."""
    free, taken = list(range(len(calls))), []
    for want in wanted:
        errors = []
        for i in free:
            why = check_call(calls[i], want, schemas, language, rules)
            if why is None:
                free.remove(i)
                taken.append(i)
                break
            errors.append(why)
        else:
            return None, errors[0] if errors else "no call matches"
    return taken, ""


def check_calls(calls: list[Call] | None, expected: dict[str, Any], rules: str | None = None) -> tuple[bool, str]:
    """Whether the candidate's ``calls`` meet ``expected`` (a tools task's test: ``calls``, the
    allowed values; ``schemas``, each function's parameters with the source's own types; ``rules``),
    and why not. ``rules`` overrides the test's (``call_rules``). A strict failure of calls that
    BFCL's rules pass says the strict rule that refused one of BFCL's matches."""
    chosen = call_rules(expected, rules)
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
    language = str(expected.get("language", "python"))
    taken, why = _matched(calls, wanted, schemas, language, "bfcl")
    if taken is None or chosen == "bfcl":
        return taken is not None, why
    strict, why = _matched(calls, wanted, schemas, language, "strict")
    if strict is not None:
        return True, ""
    refused = (check_call(calls[i], want, schemas, language, "strict") for want, i in zip(wanted, taken, strict=True))
    return False, next((r for r in refused if r is not None), why)


def api_answer(completion: str) -> Any:
    """A multi-turn answer: the completion as JSON (``{"turns": ...}``, what an episode writes), the
    last JSON code block, else the calls in its text as the first turn's, and its words around
    them as what it said (``said``; tau2 counts only the assistant's own words, never a call's)."""
    for text in (completion, *reversed(re.findall(r"```(?:json)?\n(.*?)```", completion, re.DOTALL))):
        try:
            data = untrusted_json(text)
        except ValueError:
            continue
        if isinstance(data, dict) and "turns" in data:
            return data
    calls = parse_calls(completion) or []
    words = completion
    if calls:
        end = completion.rfind("</tool_call>") + len("</tool_call>") if "</tool_call>" in completion else 0
        unblocked = TOOL_CALL.sub("", completion[:end]) + completion[end:]  # (no opener past the last closer
        words = re.sub(r"```(?:\w+)?\n.*?```", "", unblocked, flags=re.DOTALL)  # closes: linear, as parse_calls)
        words = "" if parse_calls(words) else words  # (what is left is itself the calls: bare JSON or Python)
    said = [words.strip()] if words.strip() else []
    return {"turns": [[[{"name": name, "arguments": args} for name, args in calls]]], "said": said}
