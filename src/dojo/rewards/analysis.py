"""Grading an ``analysis`` task: a Python program runs on the task's data files in the sandbox and
writes ``answer.json``; the file is fetched back and compared here, field by field, with the values
and tolerances the task's tests declare. The expected values never enter the sandbox.

Two ways a run is made:

- no entry point (``family:data_analysis``, ``family:scientific``): the candidate's program itself
  runs, in the work dir holding the task's files (``workspace``; Parquet files are stored base64,
  ``Workspace.binary``), in the task's environment (``dojo-data``: pandas, numpy, pyarrow preloaded;
  ``dojo-analysis``: scipy's solvers too);
- an entry point (``scicode:``): the candidate's code is ``solution.py`` and dojo's driver
  (``dojo.rewards.programs.capture_driver``) runs each test's ``code`` after it, writing the values
  its asserts compared. A test's value is then ``"reference": true``: the task's reference through
  the same driver in its own run (cached per task), so the values the candidate is compared with are
  computed in a sandbox too, never on the host, and never where the candidate runs.

A test's ``expected``: ``field`` (a dotted path into the answer: ``revenue.north``, ``top.0``),
``value`` or ``reference``, ``rel`` and ``abs`` (number tolerances; default 1e-6 each), ``unordered``
(a list compared as a multiset). Numbers match numbers within ``max(abs, rel * |want|)``, text and
booleans exactly, lists item by item, objects key by key, arrays by shape and values.
"""

from __future__ import annotations

import ast
import asyncio
import base64
import functools
import hashlib
import json
import math
import zlib
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dojo.rewards.extract import extract_code
from dojo.rewards.harness import InvalidTask
from dojo.rewards.outcome import CaseOutcome
from dojo.sandbox import ExecutionResult, InputFile, Limits, Program, SandboxAPI, Verdict
from dojo.tasks.analysis import ANSWER_FILE
from dojo.tasks.model import Task
from dojo.tasks.values import untrusted_json

ANSWER_MAX_BYTES = 16 << 20  # the default file-size limit of a run (a SciCode case captures fields of 200 x 200)
ANALYSIS_GRADING_LIMITS = Limits(wall_time=20.0, cpu_time=10.0, memory=1 << 30)
DEFAULT_TOLERANCE = 1e-6
_REFERENCE_CACHE: OrderedDict[str, list[Any]] = OrderedDict()
_REFERENCE_CACHE_SIZE = 256
_REFERENCE_RUNS: dict[str, asyncio.Future[list[Any] | str]] = {}  # reference runs under way, by key


@dataclass
class AnalysisGrade:
    """What grading an analysis task found (``Grader`` turns it into a ``Reward``)."""

    total: int
    passed: int = 0
    cases: list[CaseOutcome] = field(default_factory=list)
    infrastructure_error: str | None = None
    no_answer: str | None = None


def task_files(task: Task) -> list[InputFile]:
    """The task's data files as a run's input files (binary ones decoded)."""
    if task.workspace is None:
        return []
    binary = set(task.workspace.binary)
    return [
        InputFile(path=path, content=base64.b64decode(text) if path in binary else text.encode())
        for path, text in task.workspace.files.items()
    ]


@functools.cache
def capture_driver_source() -> str:
    """The capture driver's source, shipped to the run from its file."""
    return (Path(__file__).parent / "programs" / "capture_driver.py").read_text()


def driver_job(task: Task) -> dict[str, Any]:
    """The capture driver's job for an entry-point task: its prelude and each test's code."""
    prelude = str((task.metadata.model_extra or {}).get("prelude", ""))
    return {"prelude": prelude, "cases": [t.code or "" for t in task.tests], "answer": ANSWER_FILE}


def analysis_program(task: Task, code: str) -> Program:
    """The run that grades ``code``: the program itself, or the driver with ``code`` as solution.py."""
    files = task_files(task)
    if task.entry_point is None:
        return Program(language="python", source=code, files=files, fetch=[ANSWER_FILE], environment=task.environment)
    return Program(
        language="python",
        source=capture_driver_source(),
        stdin=json.dumps(driver_job(task)),
        files=[*files, InputFile(path="solution.py", content=code.encode())],
        fetch=[ANSWER_FILE],
        environment=task.environment,
    )


def read_answer(result: ExecutionResult) -> tuple[Any, str | None]:
    """(the answer file's data, None) or (None, why there is none)."""
    fetched = result.files.get(ANSWER_FILE)
    if fetched is None or fetched.content is None or fetched.error:
        how = result.verdict.value + (f" ({result.limit.value} limit)" if result.limit else "")
        tail = result.stderr.strip().splitlines()[-1][:300] if result.stderr.strip() else ""
        return None, f"no {ANSWER_FILE} was written ({how}{': ' + tail if tail else ''})"
    if fetched.truncated:
        return None, f"{ANSWER_FILE} is larger than {ANSWER_MAX_BYTES >> 20} MiB"
    return parse_answer(fetched.content)


def parse_answer(content: bytes) -> tuple[Any, str | None]:
    """(an answer file's data, None) or (None, why it is not an answer)."""
    if len(content) > ANSWER_MAX_BYTES:
        return None, f"{ANSWER_FILE} is larger than {ANSWER_MAX_BYTES >> 20} MiB"
    try:
        return untrusted_json(content.decode()), None
    except (UnicodeDecodeError, ValueError) as e:
        return None, f"{ANSWER_FILE} is not JSON: {str(e)[:200]}"


def lookup(answer: Any, path: str) -> tuple[bool, Any]:
    """(found, value) at a dotted ``path`` of the answer (list items by index)."""
    value = answer
    for part in path.split("."):
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return False, None
    return True, value


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _array(value: Any, max_items: int | None = None) -> Any:
    """A driver-encoded array (``{"$nd": ...}``) or complex number as numpy data, else None.
    ``max_items``: for a candidate's value, the most items it may hold (the expected value's), so
    that a shape it declares cannot make this process inflate gigabytes (a 5 MiB answer file of
    repeated zlib blocks declared 4 GiB: 8 GB of the grader's memory)."""
    import numpy as np

    if isinstance(value, dict) and isinstance(value.get("$nd"), dict):
        nd = value["$nd"]
        shape = [int(n) for n in nd.get("shape", [])]
        if any(n < 0 for n in shape) or (max_items is not None and math.prod(shape) > max_items):
            return None
        if isinstance(nd.get("zb64"), str):  # packed by the driver: float64 or complex128, zlib, base64
            dtype = np.dtype("<c16" if nd.get("kind") == "c" else "<f8")
            size = math.prod(shape) * dtype.itemsize
            inflate = zlib.decompressobj()
            try:
                raw = inflate.decompress(base64.b64decode(nd["zb64"]), size + 1)  # never more than the shape holds
            except zlib.error:
                return None
            return np.frombuffer(raw, dtype=dtype).reshape(shape) if len(raw) == size else None
        data = nd.get("data", [])
        if nd.get("kind") == "c":
            flat = np.array([complex(float(re), float(im)) for re, im in data], dtype=complex)
        elif nd.get("kind") in ("b", "i", "u", "f"):
            flat = np.array(data, dtype=float)
        else:
            return None
        return flat.reshape(shape)
    if isinstance(value, dict) and isinstance(value.get("$c"), list) and len(value["$c"]) == 2:
        return np.array(complex(float(value["$c"][0]), float(value["$c"][1])))
    return None


def values_match(got: Any, want: Any, rel: float, abs_: float, unordered: bool = False) -> bool:
    """Whether the candidate's ``got`` matches ``want`` (see the module doc); never raises."""
    try:
        return _match(got, want, rel, abs_, unordered, 0)
    except (TypeError, ValueError, ArithmeticError, RecursionError):
        return False


def _match(got: Any, want: Any, rel: float, abs_: float, unordered: bool, depth: int) -> bool:
    if depth > 32:
        return False
    if (w := _number(want)) is not None:
        g = _number(got)
        if g is None and (one := _array(got, max_items=1)) is not None and one.shape == ():
            return _arrays_close(one, w, rel, abs_)
        return g is not None and math.isfinite(g) and abs(g - w) <= max(abs_, rel * abs(w))
    if isinstance(want, (str, bool)) or want is None:
        return type(got) is type(want) and got == want
    want_array = _array(want)
    got_array = _array(got, max_items=_items(want_array if want_array is not None else want))
    if want_array is not None or got_array is not None:
        mine = got_array if got_array is not None else got
        return _arrays_close(mine, want_array if want_array is not None else want, rel, abs_)
    if isinstance(want, list):
        if not isinstance(got, list) or len(got) != len(want):
            return False
        if unordered:
            got, want = sorted(got, key=_order_key), sorted(want, key=_order_key)
        return all(_match(g, w, rel, abs_, False, depth + 1) for g, w in zip(got, want, strict=True))
    if isinstance(want, dict):
        return (
            isinstance(got, dict)
            and set(got) == set(want)
            and all(_match(got[k], want[k], rel, abs_, unordered, depth + 1) for k in want)
        )
    return False


def _order_key(value: Any) -> tuple[int, Any]:
    n = _number(value)
    return (0, n) if n is not None else (1, json.dumps(value, sort_keys=True, default=str))


def _items(want: Any) -> int:
    """How many numbers the expected value ``want`` holds (an array's size, a nested list's leaves)."""
    if hasattr(want, "size"):
        return int(want.size)
    if isinstance(want, (list, dict)):
        values = want.values() if isinstance(want, dict) else want
        return sum(_items(v) for v in values)
    return 1


def _arrays_close(got: Any, want: Any, rel: float, abs_: float) -> bool:
    import numpy as np

    if isinstance(got, dict) or isinstance(want, dict):
        return False
    g, w = np.asarray(got), np.asarray(want)
    if g.dtype == object or w.dtype == object or g.shape != w.shape:
        return False
    return bool(np.allclose(g, w, rtol=rel, atol=abs_))


def _reference_key(task: Task) -> str:
    text = json.dumps([task.id, task.reference, driver_job(task), task.environment], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


async def reference_values(task: Task, sandbox: SandboxAPI, limits: Limits) -> list[Any] | str:
    """The reference's captured values of each test (cached per task), or an infrastructure error.
    ``InvalidTask`` when the reference does not produce them. Gradings of one task at once (the
    audit's: the reference twice, the trivial candidates) share one reference run."""
    key = _reference_key(task)
    if key in _REFERENCE_CACHE:
        _REFERENCE_CACHE.move_to_end(key)
        return _REFERENCE_CACHE[key]
    loop = asyncio.get_running_loop()
    pending = _REFERENCE_RUNS.get(key)
    if pending is not None and pending.get_loop() is loop:
        return await asyncio.shield(pending)
    future: asyncio.Future[list[Any] | str] = loop.create_future()
    _REFERENCE_RUNS[key] = future
    try:
        found = await _reference_run(task, sandbox, limits, key)
    except asyncio.CancelledError:
        future.cancel()
        raise
    except BaseException as e:
        future.set_exception(e)
        future.exception()  # retrieved: whoever waits on it gets it raised
        raise
    else:
        future.set_result(found)
        return found
    finally:
        if _REFERENCE_RUNS.get(key) is future:
            del _REFERENCE_RUNS[key]


async def _reference_run(task: Task, sandbox: SandboxAPI, limits: Limits, key: str) -> list[Any] | str:
    code = extract_code(task.reference or "", "python")
    if not code.strip():
        raise InvalidTask(f"task {task.id}: its tests take the reference's values, but it has no reference")
    result = await sandbox.run(analysis_program(task, code), limits)
    if result.verdict is Verdict.SANDBOX_ERROR:
        return result.sandbox_error or "sandbox error"
    answer, why = read_answer(result)
    cases = answer.get("cases") if isinstance(answer, dict) else None
    if why is not None or not isinstance(cases, list) or len(cases) != len(task.tests):
        raise InvalidTask(f"task {task.id}: its reference gave no values: {why or answer}")
    broken = [i for i, c in enumerate(cases) if not isinstance(c, list)]
    if broken:
        raise InvalidTask(f"task {task.id}: its reference fails test {broken[0]}: {cases[broken[0]]}")
    _REFERENCE_CACHE[key] = cases
    while len(_REFERENCE_CACHE) > _REFERENCE_CACHE_SIZE:
        _REFERENCE_CACHE.popitem(last=False)
    return cases


async def grade_analysis(
    task: Task, completion: str, sandbox: SandboxAPI, limits: Limits | None = None, *, written: bytes | None = None
) -> AnalysisGrade:
    """Run the completion's program (see the module doc) and compare its answer file here.

    ``written``: the answer file the program is known to write whatever it runs on (the audit's
    own constant candidates, ``constant_answers``): compared the same way, without a run."""
    out = AnalysisGrade(total=len(task.tests))
    code = extract_code(completion, "python")
    if not code.strip():
        out.no_answer = "no_code: give the program as a ```python block"
        return out
    lim = limits or task.limits or ANALYSIS_GRADING_LIMITS
    reference: list[Any] | None = None
    if any(t.expected.get("reference") for t in task.tests):
        found = await reference_values(task, sandbox, lim)
        if isinstance(found, str):
            out.infrastructure_error = found
            return out
        reference = found
    if written is not None:
        answer, why = parse_answer(written)
    else:
        result = await sandbox.run(analysis_program(task, code), lim)
        if result.verdict is Verdict.SANDBOX_ERROR:
            out.infrastructure_error = result.sandbox_error or "sandbox error"
            return out
        answer, why = read_answer(result)
    if why is not None:
        out.cases.append(CaseOutcome(index=-1, passed=False, detail=why))
        return out
    if isinstance(answer, dict) and "load_error" in answer:
        why = f"the solution did not load: {answer['load_error']}"
        out.cases.append(CaseOutcome(index=-1, passed=False, detail=why))
        return out
    for i, test in enumerate(task.tests):
        spec = test.expected
        name = str(spec["field"])
        found_it, got = lookup(answer, name)
        want = reference[i] if reference is not None and spec.get("reference") else spec.get("value")
        rel, abs_ = float(spec.get("rel", DEFAULT_TOLERANCE)), float(spec.get("abs", DEFAULT_TOLERANCE))
        ok = found_it and values_match(got, want, rel, abs_, bool(spec.get("unordered")))
        if ok:
            detail = ""
        elif not found_it:
            detail = f"{name}: missing from {ANSWER_FILE}"
        elif isinstance(got, dict) and "$error" in got:
            detail = f"{name}: raised {str(got['$error'])[:300]}"
        else:
            detail = f"{name}: wrong value" + (f" ({json.dumps(got)[:200]})" if test.visible else "")
        out.cases.append(CaseOutcome(index=i, passed=ok, detail=detail))
        out.passed += ok
    return out


def _zero_like(value: Any) -> Any:
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return 0
    if isinstance(value, str):
        return ""
    if isinstance(value, list):
        return [_zero_like(v) for v in value]
    if isinstance(value, dict):
        return {k: _zero_like(v) for k, v in value.items()}
    return None


def guessed_answer(task: Task) -> dict[str, Any]:
    """An answer file with every field the task asks for, each a zero of its shape (the audit's
    "answer of zeros": it must earn nothing)."""
    answer: dict[str, Any] = {}
    for test in task.tests:
        parts = str(test.expected["field"]).split(".")
        node = answer
        for part in parts[:-1]:
            node = node.setdefault(part, {}) if isinstance(node.get(part, {}), dict) else {}
        node[parts[-1]] = _zero_like(test.expected.get("value", 0))
    return answer


def trivial_analysis_candidates(task: Task) -> list[tuple[str, str]]:
    """(name, completion) pairs that must earn nothing on an analysis task."""
    if task.entry_point is not None:
        return [
            (f"return {r}", f"```python\ndef {task.entry_point}(*args, **kwargs):\n    return {r}\n```")
            for r in ("None", "0")
        ]
    zeros = json.dumps(guessed_answer(task))
    question = _question_literal(task)
    return [
        ("empty program", "```python\n\n```"),
        ("answer of zeros", f"```python\nimport json\njson.dump({zeros}, open({ANSWER_FILE!r}, 'w'))\n```"),
        ("print the question", f"```python\nprint({question})\n{_EMPTY_ANSWER}\n```"),
    ]


_EMPTY_ANSWER = f"open({ANSWER_FILE!r}, 'w').write('{{}}')"


def _question_literal(task: Task) -> str:
    """The question as a Python string literal with no backtick: the prompts' own words "in a
    (three backticks)python block" inside the candidate's block ended it there, so the program run
    was a cut-off ``print(`` (a syntax error), not the question printed (found 2026-12-04)."""
    return json.dumps(task.prompt_text()[:4000]).replace("`", "\\u0060")


def constant_answers(task: Task) -> dict[str, bytes]:
    """The answer file each of ``trivial_analysis_candidates`` writes whatever its run sees, by the
    candidate's name: those programs read nothing (an answer of zeros: ``json.dump`` of a literal;
    the question printed, then ``{}`` written), so the audit compares the file without running them.

    Measured (2026-12-04, 1,000 tasks each, 2 shared cores): they were half of ``family:data_analysis``'s
    and ``family:scientific``'s 4,000 audit runs, ~9 ms of sandbox CPU each (a fork of a zygote
    holding pandas and scipy); every one is still compared with every test, as before. An answer
    is claimed only where the program's literal is the same data in Python as in JSON (a ``false``
    or ``null`` would make the program fail, and it runs then)."""
    if task.entry_point is not None:
        return {}
    zeros = json.dumps(guessed_answer(task))
    question = _question_literal(task)
    try:
        same = ast.literal_eval(zeros) == json.loads(zeros)
    except (ValueError, SyntaxError):
        same = False
    # The program a run would get (a fence inside the question would cut it short: then it runs).
    wanted = {
        "answer of zeros": (
            f"import json\njson.dump({zeros}, open({ANSWER_FILE!r}, 'w'))",
            zeros.encode() if same else None,
        ),
        "print the question": (f"print({question})\n{_EMPTY_ANSWER}", b"{}"),
    }
    out: dict[str, bytes] = {}
    for name, completion in trivial_analysis_candidates(task):
        code, written = wanted.get(name, (None, None))
        if written is not None and extract_code(completion, "python").strip() == code:
            out[name] = written
    return out
