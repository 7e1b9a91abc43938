"""dojo's driver for an ``analysis`` task with an entry point (SciCode): runs in the sandbox, in the
candidate's process, and decides nothing. What it writes to the answer file is compared outside,
on the host, with values the run never sees (the reference's, from its own run).

Job (stdin, JSON): ``prelude`` (the task's imports and earlier steps), ``cases`` (each a test's
code, rewritten on the host so that each ``assert`` became ``__dojo_capture__(mode, [operands])``),
``answer`` (the file to write). The candidate's code is ``solution.py`` in the work dir. The
answer file holds ``{"cases": [[value, ...], ...]}``: each case's captured values in order, or
``{"$error": ...}`` where the case raised.
"""

import json
import sys
from typing import Any

ARRAY_ITEMS_MAX = 1 << 20


def encode(value: Any, depth: int = 0) -> Any:
    # a captured value as JSON data: arrays tagged, complex numbers as pairs, the rest as text
    if depth > 20:
        return {"$repr": "too deep"}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, complex):
        return {"$c": [value.real, value.imag]}
    np = sys.modules.get("numpy")
    if np is not None:
        if hasattr(value, "toarray") and callable(value.toarray):  # a scipy.sparse matrix
            value = value.toarray()
        if isinstance(value, np.ndarray):
            if value.size > ARRAY_ITEMS_MAX:
                return {"$repr": f"array too large ({value.size} items)"}
            kind = value.dtype.kind
            if kind == "c":
                data = [[float(v.real), float(v.imag)] for v in value.ravel()]
            elif kind in "biuf":
                data = value.ravel().tolist()
            else:
                data = [encode(v, depth + 1) for v in value.ravel().tolist()]
            return {"$nd": {"shape": list(value.shape), "kind": kind, "data": data}}
        if isinstance(value, np.generic):
            return encode(value.item(), depth + 1)
    if isinstance(value, (list, tuple)):
        return [encode(v, depth + 1) for v in value]
    if isinstance(value, dict):
        return {"$dict": [[str(k), encode(v, depth + 1)] for k, v in value.items()]}
    if isinstance(value, (set, frozenset)):
        return {"$set": sorted(str(v) for v in value)}
    return {"$repr": str(value)[:2000]}


def sorted_rows(value: Any) -> Any:
    # are_equivalent compares sets of points: rows in a canonical order, in both runs
    np = sys.modules.get("numpy")
    if np is None:
        return value
    try:
        array = np.asarray(value, dtype=float)
        if array.ndim == 2 and len(array):
            return array[np.lexsort(np.round(array, 8).T[::-1])]
    except (TypeError, ValueError):
        pass
    return value


def main() -> None:
    job = json.loads(sys.stdin.read())
    captured: list[list[Any]] = []

    def capture(mode: str, values: list[Any]) -> None:
        for v in values:
            captured[-1].append(encode(sorted_rows(v) if mode == "rows" else v))

    namespace = {"__name__": "__main__", "__dojo_capture__": capture}
    cases: list[Any] = []
    out: dict[str, Any] = {"cases": cases}
    try:
        exec(compile(job["prelude"], "<prelude>", "exec"), namespace)
        with open("solution.py") as f:
            exec(compile(f.read(), "solution.py", "exec"), namespace)
    except BaseException as e:
        out["load_error"] = f"{type(e).__name__}: {e}"[:2000]
    if "load_error" not in out:
        for code in job["cases"]:
            captured.append([])
            scope = dict(namespace)
            try:
                exec(compile(code, "<test>", "exec"), scope)
                cases.append(captured[-1])
            except BaseException as e:
                cases.append({"$error": f"{type(e).__name__}: {e}"[:2000]})
    with open(job["answer"], "w") as f:
        json.dump(out, f)


main()
