"""``bfcl:<category>``: the Berkeley Function Calling Leaderboard's single-turn tasks, from the data
files of the ``bfcl-eval`` wheel (installed without its dependencies: only its files are read,
nothing of it is imported or downloaded at run time).

Each task is a ``tools`` task: the user's request, the functions offered (as OpenAI tool schemas:
BFCL's dotted names become ``math_hypot``, its types JSON Schema's), and the calls that answer it
with every allowed value, checked by ``dojo.rewards.calls``'s ``bfcl`` rules (the test says
``"rules": "bfcl"``: BFCL's checker verdict for verdict, so that leaderboard numbers carry over;
``GradingConfig(call_rules="strict")`` grades without BFCL's quirks). ``irrelevance`` and
``live_irrelevance`` tasks are answered by making no call; ``live_relevance`` by making one.

Categories: ``simple_python``, ``multiple``, ``parallel``, ``parallel_multiple``, ``live_simple``,
``live_multiple``, ``live_parallel``, ``live_parallel_multiple``, ``irrelevance``,
``live_irrelevance``, ``live_relevance`` (the AST-checked ones with Python types), ``simple_java``
and ``simple_javascript`` (every argument is that language's source text, e.g. ``"new
HashMap<String, String>() {{ put(\"k\", \"v\"); }}"``: the tools declare strings, and the type
each must write is in its description, as BFCL does). BFCL's memory and web-search categories are
not here; the multi-turn ones are ``dojo.tasks.bfcl_multi_turn``'s.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from dojo.tasks.model import Message, Task, TaskMetadata, TestCase, tool_name
from dojo.tasks.wheel_data import wheel_data

DISTRIBUTION = "bfcl-eval"
VERSION = "2026.3.23"
CATEGORIES = (
    "simple_python", "multiple", "parallel", "parallel_multiple", "live_simple", "live_multiple", "live_parallel",
    "live_parallel_multiple", "irrelevance", "live_irrelevance", "live_relevance", "simple_java", "simple_javascript",
)  # fmt: skip
LANGUAGES = {"simple_java": "java", "simple_javascript": "javascript"}
MULTI_TURN_CATEGORIES = ("multi_turn_base", "multi_turn_long_context", "multi_turn_miss_func", "multi_turn_miss_param")
JSON_TYPES = {"dict": "object", "float": "number", "tuple": "array", "any": "string"}
SYSTEM = (
    "You can call the functions below. If the request can be met with them, answer with only the call(s) that "
    'meet it, each as <tool_call>{{"name": ..., "arguments": {{...}}}}</tool_call> (or as a Python list '
    "[func(arg=value), ...]); if none of them fits, say so and make no call.\n\nFunctions:\n{functions}"
)


def data_dir() -> Path:
    return wheel_data(DISTRIBUTION, VERSION, "bfcl_eval/data", "bfcl")


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def json_schema(params: dict[str, Any]) -> dict[str, Any]:
    """BFCL's parameter types as JSON Schema's (``dict`` -> ``object``, ``float`` -> ``number``)."""
    out: dict[str, Any] = {}
    for key, value in params.items():
        if key == "type" and isinstance(value, str):
            out[key] = JSON_TYPES.get(value, value)
        elif isinstance(value, dict):
            out[key] = json_schema(value)
        elif isinstance(value, list):
            out[key] = [json_schema(v) if isinstance(v, dict) else v for v in value]
        else:
            out[key] = value
    return out


def tool_spec(function: dict[str, Any], language: str = "python") -> dict[str, Any]:
    parameters = function.get("parameters", {"type": "dict", "properties": {}})
    if language != "python":  # every argument is source text; its type is said in words (BFCL's way)
        properties = {
            name: {"type": "string", "description": f"{spec.get('description', '')} This is a {language} "
                   f"{spec.get('type', 'any')} parameter, given as {language} source text."}
            for name, spec in parameters.get("properties", {}).items()
        }  # fmt: skip
        parameters = {"type": "object", "properties": properties, "required": parameters.get("required", [])}
    return {
        "type": "function",
        "function": {
            "name": tool_name(function["name"]),
            "description": function.get("description", ""),
            "parameters": json_schema(parameters),
        },
    }


def source_literal(value: Any, spec: dict[str, Any], language: str) -> str:
    """``value`` written as Java or JavaScript source that BFCL's converter reads back as ``value``
    for a parameter of ``spec``'s type (a reference answer's argument). Text where a collection is
    expected is a variable's name: it stays as it is."""
    kind = str(spec.get("type", "any"))
    item = spec.get("items", {})

    def scalar(v: Any, quoted: bool) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, str):
            return json.dumps(v) if quoted else v
        return repr(v)

    def nested(v: Any) -> str:
        if isinstance(v, list):
            return source_literal(v, {"type": "array"}, language)
        if isinstance(v, dict):
            return source_literal(v, {"type": "dict"}, language)
        return scalar(v, True)

    if isinstance(value, str) and kind in ("Array", "ArrayList", "HashMap", "array", "dict"):
        return value
    if language == "java":
        if kind == "long":
            return f"{value}L"
        if kind == "float":
            return f"{value}f"
        if kind == "Array":
            java = {"String": "String", "integer": "int", "long": "long", "double": "double", "boolean": "boolean"}
            return f"new {java.get(str(item.get('type')), 'Object')}[]{{{', '.join(scalar(v, False) for v in value)}}}"
        if kind == "ArrayList":  # typed elements by their type; untyped ones are read as literals
            typed = item.get("type") not in (None, "String", "char", "any")
            parts = [source_literal(v, item, language) if typed else scalar(v, True) for v in value]
            return f"new ArrayList<>(Arrays.asList({', '.join(parts)}))"
        if kind == "HashMap":
            puts = " ".join(f"put({json.dumps(k)}, {scalar(v, True)});" for k, v in value.items())
            return f"new HashMap<String, String>() {{{{ {puts} }}}}"
        return scalar(value, False)
    if kind == "Bigint":
        return f"{value}n"
    if kind == "array":
        return "[" + ", ".join(nested(v) for v in value) + "]"
    if kind == "dict":
        return "{" + ", ".join(f"{k}: {nested(v)}" for k, v in value.items()) + "}"
    return scalar(value, False)


def _first_allowed(allowed: dict[str, Any], schema: dict[str, Any] | None = None) -> dict[str, Any]:
    """A value for each key: a required parameter's first value that is not ``""``, another's first
    value (left out when that is ``""``, or when the schema does not know the parameter and it may be
    left out), into nested dicts."""
    properties = (schema or {}).get("properties", {})
    required = set((schema or {}).get("required", []))

    def pick(value: Any) -> Any:
        if isinstance(value, dict):
            return _first_allowed(value)
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            return [_first_allowed(v) for v in value]
        return value

    out = {}
    for key, options in allowed.items():
        if not isinstance(options, list):  # a plain value where a list of allowed ones usually is
            out[key] = options
            continue
        given = [o for o in options if o != ""]
        if schema is not None and key not in properties and "" in options:
            continue
        if given and (key in required or options[0] != ""):
            out[key] = pick(given[0] if key in required else options[0])
    return out


def _reference(category: str, answer: dict[str, Any] | None, functions: list[dict[str, Any]]) -> str:
    """A call set that meets the answer: each parameter's first allowed value (left out when ``""``
    is the first); for relevance, a call of the first function."""
    if category.endswith("irrelevance"):
        return "None of the functions fits this request, so I make no call."
    if answer is None:
        first = {"name": tool_name(functions[0]["name"]) if functions else "none", "arguments": {}}
        return f"<tool_call>\n{json.dumps(first)}\n</tool_call>"
    blocks = []
    schemas = {f["name"]: f.get("parameters", {}) for f in functions}
    language = LANGUAGES.get(category, "python")
    for call in answer["ground_truth"]:
        [(name, params)] = call.items()
        args = _first_allowed(params, schemas.get(name, {}))
        if language != "python":
            properties = schemas.get(name, {}).get("properties", {})
            args = {k: source_literal(v, properties.get(k, {}), language) for k, v in args.items()}
        blocks.append(f"<tool_call>\n{json.dumps({'name': name, 'arguments': args})}\n</tool_call>")
    return "\n".join(blocks)


def load_bfcl(category: str, *, n: int | None = None, seed: int = 0) -> list[Task]:
    if category not in CATEGORIES:
        raise ValueError(
            f"bfcl has no category {category!r} here; categories: {', '.join(CATEGORIES + MULTI_TURN_CATEGORIES)}"
        )
    root = data_dir()
    rows = _rows(root / f"BFCL_v4_{category}.json")
    answers_path = root / "possible_answer" / f"BFCL_v4_{category}.json"
    answers = {a["id"]: a for a in _rows(answers_path)} if answers_path.exists() else {}
    if n is not None:
        rows = random.Random(seed).sample(rows, min(n, len(rows)))
    tasks = []
    for row in rows:
        functions = row["function"]
        schemas = {f["name"]: f.get("parameters", {}) for f in functions}
        if category.endswith("irrelevance"):
            expected: dict[str, Any] = {"no_call": True}
        elif category == "live_relevance":
            expected = {"any_call": True}
        else:
            expected = {"calls": answers[row["id"]]["ground_truth"], "schemas": schemas, "rules": "bfcl"}
            if category in LANGUAGES:
                expected["language"] = LANGUAGES[category]
        turns = row["question"][0]
        tools = [tool_spec(f, LANGUAGES.get(category, "python")) for f in functions]
        system = SYSTEM.format(functions=json.dumps([t["function"] for t in tools], indent=1))
        prompt = [
            Message(role="system", content=system),
            *(Message(role=m["role"], content=m["content"]) for m in turns),
        ]
        tasks.append(Task(
            id=f"bfcl:{row['id']}",
            domain="tool_calling",
            form="tools",
            prompt=prompt,
            tools=tools,
            tests=[TestCase(expected=expected)],
            reference=_reference(category, answers.get(row["id"]), functions),
            metadata=TaskMetadata(source=f"bfcl:{category}", tags=[category]),
        ))  # fmt: skip
    return tasks
