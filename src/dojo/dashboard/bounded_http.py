"""The dashboard's own requests (a sandbox service's ``/metrics``, an alert's webhook), each bounded
in total time and in bytes.

httpx's ``timeout`` bounds each read, not the request: a ``/metrics`` that sent a byte every 2 s
held the dashboard's refresh, and every page request waiting on it, without end (12 s and no answer
in the adversary's reproducer, /root/scratch/adv10/slow_service_hang.py), and its body was read
whole at any size. Here the whole request has ``seconds``, and the answer ``max_bytes``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

MAX_ANSWER_BYTES = 16 << 20  # a fleet of ~1,000 nodes' /metrics is ~2 MB


async def bounded_request(
    client: httpx.AsyncClient, method: str, url: str, *, seconds: float, max_bytes: int = MAX_ANSWER_BYTES,
    **kwargs: Any,
) -> tuple[int, bytes]:  # fmt: skip
    """The status and body of one request, within ``seconds`` in all (else ``httpx.TimeoutException``)
    and ``max_bytes`` of body (else ``ValueError``)."""
    try:
        async with asyncio.timeout(seconds):
            async with client.stream(method, url, timeout=seconds, **kwargs) as response:
                body = bytearray()
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) > max_bytes:
                        raise ValueError(f"{method} {url} answered more than {max_bytes} bytes")
                return response.status_code, bytes(body)
    except TimeoutError:
        raise httpx.TimeoutException(f"{method} {url}: no whole answer within {seconds:g} s") from None
