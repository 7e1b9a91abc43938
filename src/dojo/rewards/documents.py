"""A ``document`` task graded: the document taken from the reply (or written by the reply's script
in the sandbox and fetched back), parsed on the host, and every rule checked here.

- ``text``: the whole reply is the document (IFBench's responses);
- ``markdown``/``json``: the last fenced block tagged so (``md``, ``markdown``; ``json``), else the
  last untagged one, else the whole reply;
- ``docx``/``xlsx``: the reply's Python script runs in the sandbox, in the task's environment
  (python-docx and openpyxl preloaded), with nothing but its own source: the rules, the values they
  expect and the reference never enter the run. The file it writes (``DocumentSpec.path``) comes
  back as bytes and is parsed here; the script's own output is never read for a verdict.

A document that does not parse (bad JSON, not a docx, empty, too large, no file written) scores 0
with the reason (verdict ``compile_error``); a sandbox failure is an infrastructure error
(``None``). Each rule is one test (its weight counts in ``passed``/``total``) and one reward
component (``rule:<i>:<label>``: 1.0 or 0.0); an essential rule that fails scores the whole
document 0.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import copy
import hashlib
import json
import threading
from collections import OrderedDict
from dataclasses import dataclass, field

from dojo.rewards.document_parse import DocumentError, ParsedDocument, parse_document
from dojo.rewards.extract import extract_code, fenced_blocks
from dojo.rewards.harness import InvalidTask
from dojo.rewards.outcome import CaseOutcome
from dojo.rewards.rules import check_rules, rules_score
from dojo.sandbox import Limits, Program, SandboxAPI, Verdict
from dojo.tasks.model import Task
from dojo.tasks.rules import FILE_FORMATS, Rule, SectionsRule, parse_rule

DOCUMENT_LIMITS = Limits(wall_time=20.0, cpu_time=10.0, memory=512 << 20)
_TAGS = {"markdown": ("markdown", "md"), "json": ("json",)}


def task_rules(task: Task) -> list[Rule]:
    """The task's rules; ``InvalidTask`` naming the task when one does not parse."""
    rules = []
    for i, t in enumerate(task.tests):
        try:
            rules.append(parse_rule(t.expected))
        except ValueError as e:
            raise InvalidTask(f"task {task.id}: test {i} is not a rule: {e}") from None
    return rules


def document_text(completion: str, format: str) -> str:
    """The document a text-format reply gives (see the module doc)."""
    if format == "text":
        return completion
    blocks = fenced_blocks(completion)
    tagged = [body for tag, body in blocks if tag.lower() in _TAGS.get(format, ())]
    untagged = [body for tag, body in blocks if not tag]
    return (tagged or untagged or [completion])[-1].strip()


async def fetch_document(
    task: Task, script: str, sandbox: SandboxAPI, limits: Limits | None = None
) -> tuple[bytes | None, str | None, str | None]:
    """(the file's bytes, why there are none, an infrastructure error) after running ``script``."""
    assert task.document is not None and task.document.path is not None
    path = task.document.path
    program = Program(language="python", source=script, environment=task.environment, fetch=[path])
    lim = limits or task.limits or DOCUMENT_LIMITS
    lim = lim.model_copy(update={"file_size": max(lim.file_size, task.document.max_bytes)})
    result = await sandbox.run(program, lim)
    if result.verdict is Verdict.SANDBOX_ERROR:
        return None, None, result.sandbox_error or "sandbox error"
    fetched = result.files.get(path)
    ran = (
        ""
        if result.verdict is Verdict.ACCEPTED
        else f" (the script ended: {result.verdict.value}: {result.stderr[-300:]})"
    )
    if fetched is None or fetched.content is None:
        return None, f"the script wrote no {path}{ran}", None
    if fetched.truncated or len(fetched.content) > task.document.max_bytes:
        return None, f"{path} is larger than {task.document.max_bytes} bytes", None
    return fetched.content, None, None


def _written_document(task: Task, written: bytes) -> tuple[bytes | None, str | None, str | None]:
    """``fetch_document``'s answer for a file already written (the size limit as a run has it)."""
    assert task.document is not None
    if len(written) > task.document.max_bytes:
        return None, f"{task.document.path} is larger than {task.document.max_bytes} bytes", None
    return written, None, None


FILLER = "The details of this section are given below."  # a sentence that states nothing


def hollow_document(task: Task, filler: str = "") -> str | None:
    """A reply made of the task's required headings and nothing else, or with ``filler`` (a
    sentence) under each (an audit's trivial candidates: they must earn nothing); None when the
    task requires no sections."""
    titles = [t for r in task_rules(task) if isinstance(r, SectionsRule) for t in r.titles]
    if not titles or task.document is None:
        return None
    fmt = task.document.format
    if fmt == "json":
        body = f', "paragraphs": [{json.dumps(filler)}]' if filler else ""
        return "```json\n" + '{"sections": [' + ", ".join(f'{{"heading": "{t}"{body}}}' for t in titles) + "]}\n```"
    if fmt == "docx":
        under = f"d.add_paragraph({filler!r})\n" if filler else ""
        lines = "".join(f"d.add_heading({t!r}, level=1)\n{under}" for t in titles)
        return f"```python\nimport docx\nd = docx.Document()\n{lines}d.save({task.document.path!r})\n```"
    if fmt == "xlsx":
        under = f".append([{filler!r}])" if filler else ""
        lines = "".join(f"b.create_sheet({t[:31]!r}){under}\n" for t in titles)
        save = f"del b[b.sheetnames[0]]\nb.save({task.document.path!r})"
        return f"```python\nimport openpyxl\nb = openpyxl.Workbook()\n{lines}{save}\n```"
    return "\n\n".join(f"## {t}" + (f"\n\n{filler}" if filler else "") for t in titles)


def judge_document(rules: list[Rule], doc: ParsedDocument) -> tuple[int, int, list[CaseOutcome], dict[str, float]]:
    """(weights passed, weights in all, one outcome per rule, one component per rule)."""
    verdicts = check_rules(rules, doc)
    passed, total = rules_score(verdicts)
    cases = [CaseOutcome(index=v.index, passed=v.passed, detail=v.detail) for v in verdicts]
    if failed := [v for v in verdicts if v.essential and not v.passed]:
        cases.append(CaseOutcome(index=-1, passed=False, detail=f"an essential rule failed ({failed[0].label}): 0"))
    elif passed == 0 and any(v.passed for v in verdicts):
        about = "the task's facts" if any(v.fact for v in verdicts) else "the document's content"
        cases.append(CaseOutcome(index=-1, passed=False, detail=f"no rule about {about} holds: 0"))
    return passed, total, cases, {v.component: float(v.passed) for v in verdicts}


async def read_document(
    task: Task, completion: str, sandbox: SandboxAPI, limits: Limits | None = None, written: bytes | None = None
) -> tuple[ParsedDocument | None, str | None, str | None, str | None]:
    """(the parsed document, why there is no answer, why it does not parse, an infrastructure error).
    ``written``: a file format's file that the reply's script is known to write (see ``grade_document``)."""
    assert task.document is not None
    fmt = task.document.format
    if fmt in FILE_FORMATS:
        script = extract_code(completion, "python")
        if not script.strip():
            return None, "no_script: give the Python script that writes the file as a ```python block", None, None
        if written is not None:
            content, why, infra = _written_document(task, written)
        else:
            content, why, infra = await fetch_document(task, script, sandbox, limits)
        if infra is not None or content is None:
            return None, None, why, infra
        raw: str | bytes = content
    else:
        raw = document_text(completion, fmt)
        if not raw.strip():
            return None, "empty: the reply holds no document", None, None
        if len(raw.encode()) > task.document.max_bytes:
            return None, None, f"the document is larger than {task.document.max_bytes} bytes", None
    try:  # in a worker thread: a parse within the limits can take seconds (99,000 empty runs: 2.8 s of CPU)
        return await asyncio.to_thread(_parsed, fmt, raw), None, None, None
    except DocumentError as e:
        return None, None, f"the document does not parse: {e}", None


_PARSED: OrderedDict[tuple[str, str], ParsedDocument] = OrderedDict()  # a file format's recent parses, by digest
_PARSED_SIZE = 64
_PARSING: dict[tuple[str, str], concurrent.futures.Future[ParsedDocument]] = {}  # the parses under way, by digest
_PARSED_LOCK = threading.Lock()  # (parses run in worker threads)
_PARSE_WAIT_S = 60.0  # the bound on waiting for another thread's parse of the same bytes; then parsed here


def _parsed(fmt: str, raw: str | bytes) -> ParsedDocument:
    """``parse_document``, a docx or xlsx file's parse kept for the next time the same bytes come:
    a grading's repeats write the same file (the audit's reference twice), and a docx's parse
    costs ~4 ms of CPU here (~9 before its styles part was kept, ``document_parse``; the office
    family's audit parsed 3,000 files for 1,000 tasks). The same bytes parsed in two threads at
    once are parsed once: the second waits for the first (the audit grades a reference's two
    runs side by side, so both missed the cache: 1,332 parses of 1,042 distinct files, 2026-12-07).
    A copy is given out, so a caller never shares what it gets; a file that does not parse is
    parsed again, by each caller."""
    if fmt not in FILE_FORMATS or not isinstance(raw, bytes):
        return parse_document(fmt, raw)
    key = (fmt, hashlib.sha256(raw).hexdigest())
    mine: concurrent.futures.Future[ParsedDocument] = concurrent.futures.Future()
    with _PARSED_LOCK:
        found = _PARSED.get(key)
        if found is not None:
            _PARSED.move_to_end(key)
        else:
            under_way = _PARSING.setdefault(key, mine)  # (another thread's parse of the same bytes, or ours)
    if found is not None:
        return copy.deepcopy(found)  # (the kept parse is never changed: copied outside the lock)
    if under_way is not mine:
        try:
            return copy.deepcopy(under_way.result(timeout=_PARSE_WAIT_S))
        except Exception:  # (that parse failed, or takes too long: this caller's own, with its own error)
            return parse_document(fmt, raw)
    parsed: ParsedDocument | None = None
    try:
        parsed = parse_document(fmt, raw)
    finally:  # (whatever ends the parse: the entry goes and its waiters are answered)
        with _PARSED_LOCK:
            del _PARSING[key]
            if parsed is not None:
                _PARSED[key] = parsed
                while len(_PARSED) > _PARSED_SIZE:
                    _PARSED.popitem(last=False)
        if parsed is None:
            mine.set_exception(DocumentError("the same bytes did not parse in another thread"))  # (never raised)
        else:
            mine.set_result(parsed)
    return copy.deepcopy(parsed)


@dataclass
class DocumentGrade:
    """What grading a document found (the fields of ``graders.TestResults`` it sets)."""

    passed: int = 0
    total: int = 0
    cases: list[CaseOutcome] = field(default_factory=list)
    components: dict[str, float] = field(default_factory=dict)
    compile_error: str | None = None
    infrastructure_error: str | None = None
    no_answer: str | None = None


async def grade_document(
    task: Task, completion: str, sandbox: SandboxAPI, limits: Limits | None = None, *, written: bytes | None = None
) -> DocumentGrade:
    """Read the document (the reply, or the file its script writes in the sandbox), parse it here
    and check every rule here: each rule one test (by its weight) and one component. The parse and
    the rules run in a worker thread, so that the grader's event loop goes on meanwhile (a parse
    within the limits had held it for seconds).

    ``written``: for a file format, the file the reply's script wrote in an earlier run of the same
    script (the audit runs its own headings-only scripts once per distinct script: they read
    nothing); it is parsed and judged as a fetched one is, without a run."""
    rules = task_rules(task)
    out = DocumentGrade(total=sum(r.weight for r in rules))
    doc, out.no_answer, unparsed, out.infrastructure_error = await read_document(
        task, completion, sandbox, limits, written
    )
    if doc is None and out.no_answer is None and out.infrastructure_error is None:
        out.compile_error = unparsed or "the document does not parse"
    elif doc is not None:  # (off the event loop too: the rules read every paragraph and cell)
        out.passed, out.total, out.cases, out.components = await asyncio.to_thread(judge_document, rules, doc)
    return out
