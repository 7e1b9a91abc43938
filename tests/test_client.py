"""The HTTP clients: what they send for a session's file names, and what they do when a connection
fails before the answer."""

from __future__ import annotations

import httpx
import pytest

from dojo.client import RetryPolicy, SandboxClient, _file_url
from dojo.sandbox import Program, SandboxError, Verdict


def test_a_session_files_name_is_its_own_in_the_url() -> None:
    # unquoted, "notes?v=2.txt" was written as "notes" (and read back from there, so nothing showed)
    assert _file_url("s1", "notes?v=2.txt") == "/v1/sessions/s1/files/notes%3Fv%3D2.txt"
    assert _file_url("s1", "a#b.txt") == "/v1/sessions/s1/files/a%23b.txt"
    assert _file_url("s1", "d/100%41.txt") == "/v1/sessions/s1/files/d/100%2541.txt"


def _client(handler: httpx.MockTransport) -> SandboxClient:
    client = SandboxClient(retry=RetryPolicy(attempts=3, backoff=0.001, max_backoff=0.001))
    client._http.close()
    client._http = httpx.Client(base_url="http://127.0.0.1:9", transport=handler)
    return client


def test_a_connection_lost_before_the_answer_is_tried_again() -> None:
    calls = []

    def answer(request: httpx.Request) -> httpx.Response:
        calls.append(request.url.path)
        if len(calls) == 1:  # the server dropped a keep-alive connection (after a 500)
            raise httpx.ReadError("Connection reset by peer", request=request)
        return httpx.Response(200, json={"verdict": "Accepted", "exit_code": 0, "stdout": "1\n"})

    with _client(httpx.MockTransport(answer)) as client:
        result = client.run(Program(language="python", source="print(1)"))
    assert result.verdict is Verdict.ACCEPTED and result.stdout == "1\n" and client.retries == 1


def test_a_connection_that_keeps_failing_is_a_sandbox_error() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("Connection refused", request=request)

    with _client(httpx.MockTransport(refuse)) as client, pytest.raises(SandboxError, match="ConnectError"):
        client.run(Program(language="python", source="print(1)"))  # was httpx's own exception
    assert client.retries == 2

    def slow(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=request)

    with _client(httpx.MockTransport(slow)) as client, pytest.raises(SandboxError, match="ReadTimeout"):
        client.run(Program(language="python", source="print(1)"))
    assert client.retries == 0  # the run may still be going: not sent again

    def misconfigured(request: httpx.Request) -> httpx.Response:
        raise httpx.UnsupportedProtocol("Request URL has an unsupported protocol 'htp://'", request=request)

    with _client(httpx.MockTransport(misconfigured)) as client, pytest.raises(httpx.UnsupportedProtocol):
        client.run(Program(language="python", source="print(1)"))  # the caller's to fix: not retried, not ours
    assert client.retries == 0
