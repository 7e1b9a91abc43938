"""What an answer may cost the service, and how it is sent.

An answer is built in the service's memory before it is sent. Its size is bounded by the request's
limits (``answer_bytes``): stdout and stderr at ``limits.output`` each, every byte a control
character (six bytes in JSON: ``\\u0000``), and each fetched file at ``limits.file_size`` in base64,
all of them at most ``limits.fetched_bytes`` (what the run's scratch file systems hold).
Unbounded, one ``/v1/batch`` of 128 cases printing 1 MiB of NUL on each stream made a 1.5 GiB
answer and raised the service's peak memory by 1.7 GB (1,024 such cases, the most a batch takes,
would need ~28 GB). Admission holds the bytes a request may answer with until the answer is sent
(``answer_response``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from starlette.responses import Response, StreamingResponse

from dojo.sandbox import Limits
from dojo.sandbox.limits import DEFAULT_COMPILE_LIMITS

ESCAPED = 6  # JSON bytes of one control byte of output (\u0000)
RESULT_OVERHEAD = 4096  # a result's other fields


def answer_bytes(limits: Limits, compile_limits: Limits | None = None, fetched: Sequence[str] = ()) -> int:
    """The most bytes one run's result can take in a JSON answer under these limits (its compile
    step's output included, at ``DEFAULT_COMPILE_LIMITS`` when none are given), ``fetched`` the
    paths it brings back (each file in base64, its name twice, escaped)."""
    compiled = compile_limits or DEFAULT_COMPILE_LIMITS
    content = min(limits.file_size * len(fetched), limits.fetched_bytes)  # (the zygote's total, too)
    names = sum(2 * ESCAPED * len(path.encode()) + 512 for path in fetched)
    return 2 * ESCAPED * (limits.output + compiled.output) + -(-content // 3) * 4 + names + RESULT_OVERHEAD


ANSWER_CHUNK = 1 << 20


def answer_response(body: bytes) -> Response:
    """``body`` (JSON), sent a chunk at a time when large: uvicorn waits for a client to read each
    chunk before it takes the next, so the request, and the answer bytes admission counts for it,
    last until the client has the answer; sent whole, it sat in the server's buffers uncounted."""
    if len(body) <= ANSWER_CHUNK:
        return Response(body, media_type="application/json")

    async def chunks() -> AsyncIterator[bytes]:  # (async: a plain iterator is read on a worker thread)
        for i in range(0, len(body), ANSWER_CHUNK):
            yield body[i : i + ANSWER_CHUNK]

    return StreamingResponse(chunks(), media_type="application/json", headers={"Content-Length": str(len(body))})
