"""An extracted report graded (``answer`` tasks with ``answer_match="fields"``: ``family:doc_analysis``):
the reply's JSON object compared here, field by field, with the generator's truth. Nothing runs.

The report is the last ```json block of the reply, else the text of its ``<answer>`` tags, else the
whole reply; it must be a JSON object of at most ``REPORT_MAX_BYTES``. Each test names one field
(``expected``: ``field``, ``value``, ``match``):

- ``number``: within ``max(abs, rel * |value|)`` (``dojo.rewards.analysis.values_match``);
- ``text``: equal after case, spacing and a trailing full stop are set aside;
- ``exact``: equal as JSON data (``values_match``);
- ``set``: a list compared as a set (text items as for ``text``, objects key by key, their text
  values so too): partial credit, the F1 of precision and recall, and 0 below a precision of
  ``MIN_PRECISION``: listing everything the document mentions earns nothing (under the default reward
  mode any partial credit is worth 0.5, so a stuffed list must earn none).

Each field is one reward component (``field:<name>``, its score from 0 to 1) and counts
``FIELD_WEIGHT`` units in ``passed``/``total`` by its score. A field a reply can guess without
reading (``"guessable": true`` in its test: an auditor among five, a governing law among ten, a
discrepancy in one of a few sections) earns only beside one that it cannot: a report right in
guessable fields alone passes nothing (a constant reply had earned 0.5 on most hard
``family:doc_analysis`` tasks; adversary, 2026-12-07).
"""

from __future__ import annotations

import json
import re
from typing import Any

from dojo.rewards.analysis import DEFAULT_TOLERANCE, guessed_answer, lookup, values_match
from dojo.rewards.documents import DocumentGrade
from dojo.rewards.extract import delimited
from dojo.rewards.outcome import CaseOutcome
from dojo.tasks.model import Task
from dojo.tasks.values import untrusted_json

REPORT_MAX_BYTES = 64 << 10
FIELD_WEIGHT = 100
MIN_PRECISION = 0.5  # a set answered with less precision scores 0
_JSON_OPEN = re.compile(r"```json[ \t]*\n", re.IGNORECASE)
_FENCE_CLOSE = re.compile(r"```")
_ANSWER_OPEN, _ANSWER_CLOSE = re.compile(r"<answer>"), re.compile(r"</answer>")


def report_of(completion: str) -> tuple[dict[str, Any] | None, str | None]:
    """(the reply's report, None) or (None, why it has none). Blocks are read in linear time
    (``delimited``: 16,000 ``<answer>`` had held the event loop 18 s)."""
    blocks = [body for _, body in delimited(completion, _JSON_OPEN, _FENCE_CLOSE)]
    tagged = [body for _, body in delimited(completion, _ANSWER_OPEN, _ANSWER_CLOSE)]
    text = (blocks or tagged or [completion])[-1].strip()
    if not text:
        return None, "empty: the reply holds no report"
    if len(text.encode()) > REPORT_MAX_BYTES:
        return None, f"the report is larger than {REPORT_MAX_BYTES >> 10} KiB"
    try:
        data = untrusted_json(text)
    except ValueError as e:
        return None, f"the report is not JSON: {str(e)[:120]}"
    if not isinstance(data, dict):
        return None, "the report is not a JSON object"
    return data, None


def _text(value: Any) -> Any:
    if isinstance(value, str):
        return " ".join(value.casefold().split()).rstrip(".")
    if isinstance(value, dict):
        return {str(k): _text(v) for k, v in value.items()}
    return value


def _key(value: Any) -> str:
    return json.dumps(_text(value), sort_keys=True)


def set_score(got: Any, want: list[Any]) -> float:
    """The F1 of ``got`` (a list) against ``want`` as sets of normalised items; 0 if not a list."""
    if not isinstance(got, list) or not want:
        return 0.0
    mine, theirs = {_key(v) for v in got}, {_key(v) for v in want}
    hits = len(mine & theirs)
    if not hits:
        return 0.0
    precision, recall = hits / len(mine), hits / len(theirs)
    if precision < MIN_PRECISION:  # (a list of everything the document mentions: stuffing earns nothing)
        return 0.0
    return 2 * precision * recall / (precision + recall)


def field_score(spec: dict[str, Any], report: dict[str, Any]) -> tuple[float, str]:
    """(score 0..1, why not 1) of one field of the report."""
    name = str(spec["field"])
    found, got = lookup(report, name)
    if not found:
        return 0.0, f"{name}: missing from the report"
    want, match = spec.get("value"), spec.get("match", "exact")
    if match == "set":
        score = set_score(got, list(want or []))
        return score, "" if score == 1 else f"{name}: {score:.2f} of the set (F1)"
    if match == "text":
        ok = isinstance(got, str) and _text(got) == _text(want)
    else:
        rel, abs_ = float(spec.get("rel", DEFAULT_TOLERANCE)), float(spec.get("abs", DEFAULT_TOLERANCE))
        ok = values_match(got, want, rel, abs_)
    return float(ok), "" if ok else f"{name}: wrong value"


def grade_report(task: Task, completion: str) -> DocumentGrade:
    """Compare the reply's report with every field the task's tests declare (see the module doc)."""
    out = DocumentGrade(total=FIELD_WEIGHT * len(task.tests))
    report, why = report_of(completion)
    if report is None:
        if why and why.startswith("empty"):
            out.no_answer = why
        else:
            out.compile_error = why
        return out
    read = False  # whether a field that cannot be guessed is right, even in part
    for i, test in enumerate(task.tests):
        score, detail = field_score(test.expected, report)
        out.passed += round(FIELD_WEIGHT * score)
        out.cases.append(CaseOutcome(index=i, passed=score == 1, detail=detail))
        out.components[f"field:{test.expected['field']}"] = round(score, 4)
        read = read or (score > 0 and not test.expected.get("guessable"))
    if out.passed and not read and any(not t.expected.get("guessable") for t in task.tests):
        out.passed = 0
        out.cases.append(CaseOutcome(index=-1, passed=False, detail="only fields a reply can guess are right: "
                                     "the report earns nothing without one that must be read"))  # fmt: skip
    return out


def trivial_report_candidates(task: Task) -> list[tuple[str, str]]:
    """(name, completion) pairs that must earn nothing: an empty report, every field zeroed, the
    question echoed as JSON, a claim."""
    zeros = guessed_answer(task)
    constant: dict[str, Any] = {}  # every guessable field's first guess: a reply that reads nothing
    for test in task.tests:
        if test.expected.get("guessable"):
            value = test.expected.get("value")
            constant[str(test.expected["field"])] = value[:1] if isinstance(value, list) else value
    return [
        ("empty report", "```json\n{}\n```"),
        ("guessable fields alone", f"```json\n{json.dumps(constant)}\n```"),
        ("report of zeros", f"```json\n{json.dumps(zeros)}\n```"),
        ("question echoed", json.dumps({"question": task.prompt_text()})),
        ("claims success", "I extracted every field; the report is complete and correct."),
    ]
