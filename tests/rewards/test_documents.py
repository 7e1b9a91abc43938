"""Grading a document (``dojo.rewards.documents``): what the grader's event loop does meanwhile."""

from __future__ import annotations

import asyncio
import io
import zipfile

import docx

from dojo.rewards.documents import grade_document
from dojo.sandbox import AsyncSandbox
from dojo.tasks import generate_tasks


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


async def test_a_slow_document_leaves_the_event_loop_free(fast_sandbox: AsyncSandbox) -> None:
    """A parse within the limits can take seconds (99,000 empty runs: ~2.8 s of CPU); run on the
    grader's event loop, it held every other episode's requests and runs for that long."""
    task = next(t for t in generate_tasks("office", n=6, seed=0) if t.document and t.document.format == "docx")
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    ticker = asyncio.create_task(tick())
    try:
        loop = asyncio.get_running_loop()
        start = loop.time()
        graded = await grade_document(task, "```python\npass\n```", fast_sandbox, written=_runs(99_000))
        seconds = loop.time() - start
    finally:
        ticker.cancel()
    assert graded.passed == 0 and graded.compile_error is not None  # (the document is empty: 0, not None)
    assert seconds > 0.5  # (the parse's own work: too short to tell otherwise)
    assert ticks >= seconds / 0.01 / 4  # the loop went on (it ticked 0 times while the parse held it)
