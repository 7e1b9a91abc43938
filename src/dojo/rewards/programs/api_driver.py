"""The simulated-API driver: the program of every run of calls on a ``tools`` task's API
(``dojo.rewards.simulated_api``, which builds its spec and compares the reports).

It makes the API objects, makes the calls turn by turn, and writes one report: per turn, one digest
per call's result and one state digest per object. Its argument is the spec's file.
"""

import copy
import hashlib
import importlib
import io
import json
import math
import sys
from typing import Any


def encode(value: Any, done: set[int]) -> Any:
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            return {"__float__": repr(value)}
        return int(value) if value.is_integer() else value
    if isinstance(value, list):
        return [encode(v, done) for v in value]
    if isinstance(value, tuple):
        return {"__tuple__": [encode(v, done) for v in value]}
    if isinstance(value, (set, frozenset)):
        items = [encode(v, done) for v in value]
        return {"__set__": sorted(items, key=lambda v: json.dumps(v, sort_keys=True))}
    if isinstance(value, dict):
        if all(isinstance(k, str) for k in value):
            return {k: encode(v, done) for k, v in value.items()}
        pairs = [[encode(k, done), encode(v, done)] for k, v in value.items()]
        return {"__dict__": sorted(pairs, key=lambda p: json.dumps(p, sort_keys=True))}
    if hasattr(value, "__dict__") and not callable(value):
        if id(value) in done:
            return {"__ref__": type(value).__name__}
        done.add(id(value))
        attrs = {k: encode(v, done) for k, v in vars(value).items() if not k.startswith("_")}
        return {"__object__": type(value).__name__, "attrs": attrs}
    return {"__repr__": repr(value)}


def digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def state(objects: dict[str, Any]) -> dict[str, dict[str, str]]:
    out = {}
    for name, obj in objects.items():
        own = getattr(type(obj), "_state", None)
        if callable(own):  # an API that says what its state is (a database's hash)
            out[name] = {k: digest(v) for k, v in own(obj).items()}
            continue
        done = {id(obj)}
        out[name] = {k: digest(encode(v, done)) for k, v in vars(obj).items() if not k.startswith("_")}
    return out


def result_text(value: Any) -> str:
    if type(value) is str:
        return value
    if type(value) is dict:
        try:
            return json.dumps(value)
        except Exception:
            return str(value)
    return str(value)


def main() -> None:
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    report_to = sys.stdout
    sys.stdout = sys.stderr = io.StringIO()  # what the API prints is not the report
    objects = {}
    for name in spec["classes"]:
        obj = getattr(importlib.import_module(spec["modules"][name]), name)()
        if name not in spec["stateless"]:
            obj._load_scenario(copy.deepcopy(spec["config"].get(name, {})), long_context=spec["long_context"])
        objects[name] = obj
    methods = {}
    for obj in objects.values():  # a later class's method of the same name wins (BFCL's order)
        for attr in dir(obj):
            if not attr.startswith("_") and callable(getattr(obj, attr, None)):
                methods[attr] = getattr(obj, attr)

    report: dict[str, list[dict[str, Any]]] = {"turns": []}
    observe_from = spec.get("observe_from")
    states = spec.get("states", "each")
    n = 0
    for t, turn in enumerate(spec["turns"]):
        allowed = turn.get("allowed")
        results = []
        for call in turn["calls"]:
            name = call.get("name")
            args, kwargs = call.get("args", []), call.get("arguments", {})
            method = methods.get(name) if isinstance(name, str) and not name.startswith("_") else None
            failed = True
            if method is None or (allowed is not None and name not in allowed):
                text = f"Error during execution: there is no function {name!r} to call"
            elif not isinstance(args, list) or not isinstance(kwargs, dict):
                text = f"Error during execution: the arguments of {name} must be an object"
            else:
                try:
                    text, failed = result_text(method(*args, **kwargs)), False
                except Exception as e:
                    text = f"Error during execution: {e}"
            entry: dict[str, Any] = {"sha256": hashlib.sha256(text.encode()).hexdigest()}
            if failed:
                entry["error"] = True
            if observe_from is not None and n >= observe_from:
                entry["text"] = text
            results.append(entry)
            n += 1
        last = t == len(spec["turns"]) - 1
        snapshot = state(objects) if states == "each" or (states == "last" and last) else {}
        report["turns"].append({"results": results, "state": snapshot})
    report_to.write(json.dumps(report))
    report_to.flush()


if __name__ == "__main__":
    main()
