"""HTTP clients for `dojo serve`, mirroring the library API: ``SandboxClient`` and ``AsyncSandboxClient``.

    with SandboxClient("http://127.0.0.1:8080") as client:
        result = client.run(Program(language="python", source="print(1)"))

They retry only what is not the program's fault: a ``SandboxError`` verdict, 429 (queue full),
503 (the sandbox failed under the request: a slot died as it started) and a connection lost before
the answer,
with exponential backoff inside a time budget. A user verdict (WrongAnswer, TimeLimitExceeded...)
is never retried. Other HTTP errors raise ``ServiceError`` with the server's message.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx

from dojo.errors import DojoError
from dojo.sandbox import ExecutionResult, Limits, Program, SandboxError, Verdict


class ServiceError(DojoError):
    """The service refused the request (4xx) or failed (5xx); the message is the server's."""

    def __init__(self, status_code: int, message: str, request_id: str | None = None) -> None:
        super().__init__(f"HTTP {status_code}: {message}" + (f" (request {request_id})" if request_id else ""))
        self.status_code = status_code
        self.message = message
        self.request_id = request_id


@dataclass(frozen=True)
class RetryPolicy:
    """Retries for SandboxError results, 429s and 503s: at most ``attempts`` tries within ``budget`` seconds."""

    attempts: int = 5
    backoff: float = 0.05
    max_backoff: float = 2.0
    budget: float = 60.0

    def delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self.max_backoff * 4)
        base = min(self.max_backoff, self.backoff * 2.0**attempt)
        return float(base * (0.5 + random.random() / 2))


def _error(response: httpx.Response) -> ServiceError:
    try:
        body = response.json()
        message = body.get("error") or body.get("detail") or response.text
    except ValueError:
        message = response.text
    return ServiceError(response.status_code, str(message), response.headers.get("x-request-id"))


def _retry_after(response: httpx.Response) -> float | None:
    try:
        return float(response.headers.get("retry-after", ""))
    except ValueError:
        return None


# A connection that failed before its answer: tried again (a run has no effect outside its sandbox,
# unless its limits open the network). A timeout is not: the run may still be going.
LOST = (httpx.ConnectError, httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError)


def _retry_wait(
    client: Any, response: httpx.Response | httpx.TransportError, attempt: int, start: float
) -> tuple[float | None, Any]:
    """After one try: (seconds to wait before retrying, None) or (None, the JSON body to return). A
    connection that failed before an answer (the server closed it: after a 500, uvicorn drops the
    keep-alive connection a next request may already be on) is tried again; past the retries, or on
    a timeout (the run may still be going), it is a ``SandboxError``, not httpx's own exception; a
    request that could not be sent as asked (a bad URL, header or proxy) raises httpx's error."""
    policy: RetryPolicy = client.retry
    last = attempt == policy.attempts - 1 or time.monotonic() - start > policy.budget
    if isinstance(response, httpx.TransportError):
        if isinstance(response, httpx.TimeoutException) or (isinstance(response, LOST) and last):
            raise SandboxError(f"no answer from the service: {type(response).__name__}: {response}") from response
        if not isinstance(response, LOST):  # a bad URL, header or proxy: the caller's to fix
            raise response
        client.retries += 1
        return policy.delay(attempt, None), None
    if response.status_code in (429, 503) and not last:
        client.retries += 1
        return policy.delay(attempt, _retry_after(response)), None
    if response.status_code >= 400:
        raise _error(response)
    data = response.json()
    if data.get("verdict") == Verdict.SANDBOX_ERROR and not last:
        client.retries += 1
        return policy.delay(attempt, None), None
    return None, data


def _run_body(program: Program, limits: Limits | None, compile_limits: Limits | None, isolation: str) -> dict[str, Any]:
    body: dict[str, Any] = {"program": program.model_dump(mode="json"), "isolation": isolation}
    if limits is not None:
        body["limits"] = limits.model_dump(mode="json")
    if compile_limits is not None:
        body["compile_limits"] = compile_limits.model_dump(mode="json")
    return body


def _file_url(session_id: str, path: str) -> str:
    """A session file's URL: ``?``, ``#`` and ``%`` in ``path`` are its own (unquoted, ``notes?v=2.txt``
    was written as ``notes``, and read back from there too)."""
    return f"/v1/sessions/{session_id}/files/{quote(path, safe='/')}"


def _headers(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


class AsyncSandboxClient:
    """Async client. Use ``async with`` or call ``aclose()``."""

    def __init__(
        self, base_url: str = "http://127.0.0.1:8080", *, token: str | None = None, timeout: float = 120.0,
        retry: RetryPolicy | None = None, max_connections: int = 256,
    ) -> None:  # fmt: skip
        self.retry = retry or RetryPolicy()
        self._http = httpx.AsyncClient(
            base_url=base_url, headers=_headers(token), timeout=timeout,
            limits=httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections),
        )  # fmt: skip
        self.retries = 0

    async def _post_result(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        start = time.monotonic()
        for attempt in range(self.retry.attempts):
            try:
                response: httpx.Response | httpx.TransportError = await self._http.post(path, json=body)
            except httpx.TransportError as e:
                response = e
            wait, data = _retry_wait(self, response, attempt, start)
            if wait is None:
                return dict(data)
            await asyncio.sleep(wait)
        raise SandboxError("retry budget exhausted")  # pragma: no cover - the loop returns or raises

    async def run(
        self, program: Program, limits: Limits | None = None, *, compile_limits: Limits | None = None,
        isolation: str = "fast",
    ) -> ExecutionResult:  # fmt: skip
        data = await self._post_result("/v1/run", _run_body(program, limits, compile_limits, isolation))
        return ExecutionResult.model_validate(data)

    async def run_many(self, programs: Iterable[Program], limits: Limits | None = None) -> list[ExecutionResult]:
        return list(await asyncio.gather(*(self.run(p, limits) for p in programs)))

    async def batch(self, body: dict[str, Any]) -> dict[str, Any]:
        """POST /v1/batch with a raw body (see docs/api.md)."""
        response = await self._http.post("/v1/batch", json=body)
        if response.status_code >= 400:
            raise _error(response)
        result: dict[str, Any] = response.json()
        return result

    async def open_session(
        self, language: str, limits: Limits | None = None, ttl: float | None = None
    ) -> AsyncClientSession:
        body: dict[str, Any] = {"language": language}
        if limits is not None:
            body["limits"] = limits.model_dump(mode="json")
        if ttl is not None:
            body["ttl"] = ttl
        response = await self._http.post("/v1/sessions", json=body)
        if response.status_code >= 400:
            raise _error(response)
        return AsyncClientSession(self._http, response.json()["id"])

    async def health(self) -> dict[str, Any]:
        response = await self._http.get("/healthz")
        if response.status_code >= 400:
            raise _error(response)
        data: dict[str, Any] = response.json()
        return data

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncSandboxClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class AsyncClientSession:
    def __init__(self, http: httpx.AsyncClient, session_id: str) -> None:
        self._http = http
        self.id = session_id

    async def exec(self, code: str, stdin: str = "", limits: Limits | None = None) -> ExecutionResult:
        body: dict[str, Any] = {"code": code, "stdin": stdin}
        if limits is not None:
            body["limits"] = limits.model_dump(mode="json")
        response = await self._http.post(f"/v1/sessions/{self.id}/exec", json=body)
        if response.status_code >= 400:
            raise _error(response)
        return ExecutionResult.model_validate(response.json())

    async def write_file(self, path: str, content: bytes) -> None:
        response = await self._http.put(_file_url(self.id, path), content=content)
        if response.status_code >= 400:
            raise _error(response)

    async def read_file(self, path: str) -> bytes:
        response = await self._http.get(_file_url(self.id, path))
        if response.status_code == 404:
            raise FileNotFoundError(_error(response).message)
        if response.status_code >= 400:
            raise _error(response)
        return response.content

    async def close(self) -> None:
        response = await self._http.delete(f"/v1/sessions/{self.id}")
        if response.status_code >= 400 and response.status_code != 404:
            raise _error(response)

    async def __aenter__(self) -> AsyncClientSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class SandboxClient:
    """Synchronous client with the same methods as ``AsyncSandboxClient``."""

    def __init__(
        self, base_url: str = "http://127.0.0.1:8080", *, token: str | None = None, timeout: float = 120.0,
        retry: RetryPolicy | None = None,
    ) -> None:  # fmt: skip
        self.retry = retry or RetryPolicy()
        self._http = httpx.Client(base_url=base_url, headers=_headers(token), timeout=timeout)
        self.retries = 0

    def _post_result(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        start = time.monotonic()
        for attempt in range(self.retry.attempts):
            try:
                response: httpx.Response | httpx.TransportError = self._http.post(path, json=body)
            except httpx.TransportError as e:
                response = e
            wait, data = _retry_wait(self, response, attempt, start)
            if wait is None:
                return dict(data)
            time.sleep(wait)
        raise SandboxError("retry budget exhausted")  # pragma: no cover

    def run(
        self, program: Program, limits: Limits | None = None, *, compile_limits: Limits | None = None,
        isolation: str = "fast",
    ) -> ExecutionResult:  # fmt: skip
        return ExecutionResult.model_validate(
            self._post_result("/v1/run", _run_body(program, limits, compile_limits, isolation))
        )

    def batch(self, body: dict[str, Any]) -> dict[str, Any]:
        response = self._http.post("/v1/batch", json=body)
        if response.status_code >= 400:
            raise _error(response)
        result: dict[str, Any] = response.json()
        return result

    def open_session(self, language: str, limits: Limits | None = None, ttl: float | None = None) -> ClientSession:
        body: dict[str, Any] = {"language": language}
        if limits is not None:
            body["limits"] = limits.model_dump(mode="json")
        if ttl is not None:
            body["ttl"] = ttl
        response = self._http.post("/v1/sessions", json=body)
        if response.status_code >= 400:
            raise _error(response)
        return ClientSession(self._http, response.json()["id"])

    def health(self) -> dict[str, Any]:
        response = self._http.get("/healthz")
        if response.status_code >= 400:
            raise _error(response)
        data: dict[str, Any] = response.json()
        return data

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> SandboxClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ClientSession:
    def __init__(self, http: httpx.Client, session_id: str) -> None:
        self._http = http
        self.id = session_id

    def exec(self, code: str, stdin: str = "", limits: Limits | None = None) -> ExecutionResult:
        body: dict[str, Any] = {"code": code, "stdin": stdin}
        if limits is not None:
            body["limits"] = limits.model_dump(mode="json")
        response = self._http.post(f"/v1/sessions/{self.id}/exec", json=body)
        if response.status_code >= 400:
            raise _error(response)
        return ExecutionResult.model_validate(response.json())

    def write_file(self, path: str, content: bytes) -> None:
        response = self._http.put(_file_url(self.id, path), content=content)
        if response.status_code >= 400:
            raise _error(response)

    def read_file(self, path: str) -> bytes:
        response = self._http.get(_file_url(self.id, path))
        if response.status_code == 404:
            raise FileNotFoundError(_error(response).message)
        if response.status_code >= 400:
            raise _error(response)
        return response.content

    def close(self) -> None:
        response = self._http.delete(f"/v1/sessions/{self.id}")
        if response.status_code >= 400 and response.status_code != 404:
            raise _error(response)

    def __enter__(self) -> ClientSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
