"""dojo's driver for an ``analysis`` task with an entry point (SciCode): runs in the sandbox, in the
candidate's process, and decides nothing. What it writes to the answer file is compared outside,
on the host, with values the run never sees (the reference's, from its own run).

Job (stdin, JSON): ``prelude`` (the task's imports and earlier steps), ``cases`` (each a test's
code, rewritten on the host so that each ``assert`` became ``__dojo_capture__(mode, [operands])``;
run in order in one scope, as SciCode runs a step's cases in one file),
``answer`` (the file to write). The candidate's code is ``solution.py`` in the work dir. The
answer file holds ``{"cases": [[value, ...], ...]}``: each case's captured values in order, or
``{"$error": ...}`` where the case raised. An array is ``{"$nd": {"shape", "kind", "data"}}``, a
numeric one of more than ``PACKED_FROM`` items with ``"zb64"`` instead of ``data``: its float64 or
complex128 bytes, little-endian, zlib-compressed, in base64 (SciCode's 800 x 800 filtered images
and masks: 46 MB as JSON lists, under 4 MB so).
"""

import base64
import json
import sys
import zlib
from typing import Any

ARRAY_ITEMS_MAX = 1 << 22
PACKED_FROM = 64  # items: a larger numeric array is sent as its bytes in base64


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
            shape = list(value.shape)
            if kind in "biufc" and value.size > PACKED_FROM:  # raw little-endian float64/complex128
                packed = zlib.compress(np.ascontiguousarray(value, dtype="<c16" if kind == "c" else "<f8").tobytes(), 1)
                return {"$nd": {"shape": shape, "kind": kind, "zb64": base64.b64encode(packed).decode()}}
            if kind == "c":
                data = [[float(v.real), float(v.imag)] for v in value.ravel()]
            elif kind in "biuf":
                data = value.ravel().tolist()
            else:
                data = [encode(v, depth + 1) for v in value.ravel().tolist()]
            return {"$nd": {"shape": shape, "kind": kind, "data": data}}
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
            try:  # one scope for all cases, in order, as SciCode runs them (a case reads names an earlier one set)
                exec(compile(code, "<test>", "exec"), namespace)
                cases.append(captured[-1])
            except BaseException as e:
                cases.append({"$error": f"{type(e).__name__}: {e}"[:2000]})
    with open(job["answer"], "w") as f:
        json.dump(out, f)


main()
