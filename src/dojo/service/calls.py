"""Function-call test cases: run a Python program's function on JSON arguments, bring the JSON
return value back in a file, and compare it on the host (the expected value never enters)."""

from __future__ import annotations

import json
import secrets
from typing import Any

from dojo.sandbox import ExecutionResult, Program, Verdict

HARNESS = """

import json as _dojo_json
_dojo_call = _dojo_json.loads({call!r})
_dojo_value = globals()[_dojo_call["function"]](*_dojo_call["args"], **_dojo_call["kwargs"])
with open({path!r}, "w") as _dojo_out:
    _dojo_json.dump(_dojo_value, _dojo_out)
"""


def with_call(program: Program, function: str, args: list[Any], kwargs: dict[str, Any]) -> tuple[Program, str]:
    """The program with a harness appended that calls ``function`` and writes its result."""
    path = f".dojo-return-{secrets.token_hex(8)}.json"
    call = json.dumps({"function": function, "args": args, "kwargs": kwargs})
    source = program.source + HARNESS.format(call=call, path=path)
    return program.model_copy(update={"source": source, "fetch": [*program.fetch, path]}), path


def read_return(result: ExecutionResult, path: str) -> tuple[ExecutionResult, Any]:
    """Parse the returned value; a missing or unparsable file after exit 0 is a RuntimeError."""
    fetched = result.files.get(path)
    files = {k: v for k, v in result.files.items() if k != path}
    result = result.model_copy(update={"files": files})
    if result.verdict is not Verdict.ACCEPTED:
        return result, None
    try:
        assert fetched is not None and fetched.content is not None
        return result, json.loads(fetched.content)
    except (AssertionError, ValueError):
        note = "the function's return value was not written (not JSON-serialisable, or the program exited early)"
        return result.model_copy(update={"verdict": Verdict.RUNTIME_ERROR, "stderr": result.stderr + note}), None


def judge_return(result: ExecutionResult, value: Any, expected: Any) -> ExecutionResult:
    if result.verdict is Verdict.ACCEPTED and value != expected:
        return result.model_copy(update={"verdict": Verdict.WRONG_ANSWER})
    return result
