"""Grading a document (``dojo.rewards.documents``): what the grader's event loop does meanwhile."""

from __future__ import annotations

import asyncio
import hashlib
import io
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import docx
import pytest

from dojo.rewards import documents
from dojo.rewards.document_parse import DocumentError, ParsedDocument, parse_document
from dojo.rewards.documents import grade_document
from dojo.sandbox import AsyncSandbox
from dojo.tasks import generate_tasks
from tests.sandbox.conftest import requires_isolation


def _runs(count: int) -> bytes:
    """A docx whose one paragraph holds ``count`` empty runs: within the parse's limits, and slow."""
    blank = io.BytesIO()
    docx.Document().save(blank)
    out = io.BytesIO()
    with zipfile.ZipFile(blank) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for item in src.infolist():
            data = src.read(item.filename)
            if item.filename == "word/document.xml":
                head = data.split(b"<w:body>")[0]
                data = head + b"<w:body><w:p>" + b"<w:r/>" * count + b"</w:p></w:body></w:document>"
            dst.writestr(item, data)
    return out.getvalue()


async def test_a_slow_document_leaves_the_event_loop_free(
    fast_sandbox: AsyncSandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A parse within the limits can take seconds (99,000 empty runs: ~2.8 s of CPU); run on the
    grader's event loop, it held every other episode's requests and runs for that long."""
    task = next(t for t in generate_tasks("office", n=6, seed=0) if t.document and t.document.format == "docx")
    spans: list[tuple[float, float]] = []

    def timed(fmt: str, raw: str | bytes) -> ParsedDocument:
        start = time.monotonic()
        try:
            return parse_document(fmt, raw)
        finally:
            spans.append((start, time.monotonic()))

    monkeypatch.setattr(documents, "parse_document", timed)
    ticks: list[float] = []

    async def tick() -> None:
        while True:
            await asyncio.sleep(0.01)
            ticks.append(time.monotonic())

    ticker = asyncio.create_task(tick())
    try:
        graded = await grade_document(task, "```python\npass\n```", fast_sandbox, written=_runs(99_000))
    finally:
        ticker.cancel()
    assert graded.passed == 0 and graded.compile_error is not None  # (the document is empty: 0, not None)
    ((start, end),) = spans
    assert any(start < t < end for t in ticks)  # the loop went on during the parse (it had not ticked once)


FIRST_GRADES = """
import asyncio
from dojo.rewards import Grader
from dojo.sandbox import AsyncSandbox
from dojo.tasks import generate_tasks
async def main():
    tasks = [t for t in generate_tasks("office", n=16, seed=3) if t.document.format == "docx"][:6]
    async with AsyncSandbox(pool_size=2) as sandbox:
        rewards = await asyncio.gather(*(Grader(sandbox).grade(t, t.reference) for t in tasks))
    print([r.value for r in rewards], [r.error for r in rewards if r.value != 1.0])
asyncio.run(main())
"""


@requires_isolation
def test_the_first_docx_grades_of_a_fresh_process_read_their_documents() -> None:
    """A process's first documents are parsed on worker threads at once: one importing ``docx`` and
    one a module of it deadlocked on the two module locks, which CPython breaks by handing one a
    half-initialised module; the references' documents did not open (AttributeError), and in a
    fresh process 3 to 6 of 6 right answers scored 0 (the suite imports docx first, which hid it)."""
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run([sys.executable, "-c", FIRST_GRADES], cwd=root, capture_output=True, text=True,
                          timeout=240, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "[1.0, 1.0, 1.0, 1.0, 1.0, 1.0] []", proc.stdout


def test_the_same_file_parsed_in_two_threads_at_once_is_parsed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The audit grades a reference's two runs side by side: both files came back at once, both
    missed the cache and both were parsed (1,332 parses of 1,042 distinct files for the office
    family's 1,000 tasks). The second caller now waits for the first's parse, and gets its own copy;
    a file that does not parse fails for each caller."""
    from collections import OrderedDict
    from concurrent.futures import ThreadPoolExecutor

    monkeypatch.setattr(documents, "_PARSED", OrderedDict())
    parsing = threading.Event()
    go_on = threading.Event()
    calls: list[bytes] = []

    def held(fmt: str, raw: str | bytes) -> ParsedDocument:
        assert isinstance(raw, bytes)
        calls.append(raw)
        parsing.set()
        assert go_on.wait(10)
        return parse_document(fmt, raw)

    monkeypatch.setattr(documents, "parse_document", held)
    written = io.BytesIO()
    made = docx.Document()
    made.add_heading("Summary", level=1)
    made.add_paragraph("Total: 12")
    made.save(written)
    for data, parses in ((written.getvalue(), 1), (b"PK\x03\x04 not a zip", 2)):
        calls.clear()
        parsing.clear()
        go_on.clear()
        with ThreadPoolExecutor(2) as pool:
            first = pool.submit(documents._parsed, "docx", data)
            assert parsing.wait(10)
            second = pool.submit(documents._parsed, "docx", data)
            under_way = documents._PARSING[("docx", hashlib.sha256(data).hexdigest())]
            deadline = time.monotonic() + 10
            while not under_way._condition._waiters and time.monotonic() < deadline:  # type: ignore[attr-defined]
                time.sleep(0.005)  # (until the second caller waits for the first's parse)
            assert under_way._condition._waiters, "the second caller did not wait"  # type: ignore[attr-defined]
            go_on.set()
            if parses == 1:
                a, b = first.result(10), second.result(10)
                assert a == b and a.sections[0].title == "Summary"
                assert a is not b and a.sections is not b.sections and a.sections[0] is not b.sections[0]
            else:
                for future in (first, second):
                    with pytest.raises(DocumentError):
                        future.result(10)
        assert len(calls) == parses
    assert not documents._PARSING  # nothing left under way
