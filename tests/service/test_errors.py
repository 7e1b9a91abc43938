"""Errors map to statuses by kind: the caller's input is a 4xx that says what was wrong; the
service's own failure is a 500, never a 4xx, whatever Python type it has; the sandbox's failure
under a request (a slot that died) is a 503 the client may retry."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

from dojo.errors import DojoError, InputError
from dojo.sandbox import SandboxError, UnknownLanguage
from dojo.service import ServiceSettings, create_app


class BrokenSandbox:
    """A sandbox stand-in whose runs fail with a given exception."""

    pool_size = 1
    started = True

    def __init__(self, error: Exception) -> None:
        self.error = error

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def run(self, *args: Any, **kwargs: Any) -> Any:
        raise self.error


@pytest.mark.parametrize(
    ("error", "status", "says"),
    [
        (ValueError("an internal bug"), 500, "internal error (ValueError)"),
        (KeyError("slot"), 500, "internal error (KeyError)"),
        (UnknownLanguage("unknown language 'cobol'; known: python, ..."), 400, "unknown language 'cobol'"),
        (InputError("wall_time 99s is over this service's maximum"), 400, "over this service's maximum"),
        (SandboxError("slot session-3 did not start"), 503, "the sandbox failed: slot session-3 did not start"),
    ],
)
def test_an_internal_error_is_a_500_and_bad_input_a_400(error: Exception, status: int, says: str) -> None:
    app = create_app(ServiceSettings(), sandbox=BrokenSandbox(error))  # type: ignore[arg-type]
    with TestClient(app, raise_server_exceptions=False) as client:
        r = client.post("/v1/run", json={"program": {"language": "python", "source": "print(1)"}})
    assert r.status_code == status and says in r.json()["error"], r.text


def test_every_dojo_error_has_one_root() -> None:
    from dojo.agent.policy import PolicyError
    from dojo.client import ServiceError
    from dojo.integrations.verl_data import RewardUnavailable
    from dojo.rewards import InvalidTask
    from dojo.sandbox import IsolationUnavailable, LanguageUnavailable
    from dojo.service.admission import Overloaded
    from dojo.service.server import UnsafeBind
    from dojo.service.sessions import SessionLimitReached
    from dojo.tasks.files import TaskFileError
    from dojo.train.config import ConfigError
    from dojo.train.run import RunDirError

    errors = [SandboxError, IsolationUnavailable, UnknownLanguage, LanguageUnavailable, TaskFileError, InvalidTask,
              PolicyError, ServiceError, RewardUnavailable, Overloaded, SessionLimitReached, UnsafeBind,
              ConfigError, RunDirError]  # fmt: skip
    assert all(issubclass(e, DojoError) for e in errors)
    inputs = [UnknownLanguage, LanguageUnavailable, TaskFileError, InvalidTask, UnsafeBind, ConfigError, RunDirError]
    assert all(issubclass(e, InputError) and issubclass(e, ValueError) for e in inputs)


class FlakySandbox(BrokenSandbox):
    """Fails its first run with a SandboxError (a slot that died as it started), then runs."""

    async def run(self, *args: Any, **kwargs: Any) -> Any:
        from dojo.sandbox import ExecutionResult, Verdict

        if not getattr(self, "failed", False):
            self.failed = True
            raise self.error
        return ExecutionResult(verdict=Verdict.ACCEPTED, stdout="1\n", exit_code=0)


def test_the_client_retries_a_503_and_gets_the_result() -> None:
    from dojo.client import RetryPolicy, SandboxClient
    from dojo.sandbox import Program, Verdict

    app = create_app(ServiceSettings(retry_after=0.01), sandbox=FlakySandbox(SandboxError("slot-1 died")))  # type: ignore[arg-type]
    with TestClient(app, raise_server_exceptions=False) as http:
        client = SandboxClient(retry=RetryPolicy(attempts=3, max_backoff=0.01))
        client._http.close()
        client._http = http  # the app in this process
        result = client.run(Program(language="python", source="print(1)"))
    assert result.verdict is Verdict.ACCEPTED and result.stdout == "1\n"
    assert client.retries == 1


class BuggySandbox(BrokenSandbox):
    """Fails a run of ``boom`` with an internal bug; runs anything else."""

    async def run(self, program: Any, *args: Any, **kwargs: Any) -> Any:
        from dojo.sandbox import ExecutionResult, Verdict

        if program.source == "boom":
            raise ValueError("an internal bug")
        return ExecutionResult(verdict=Verdict.ACCEPTED, stdout="1\n", exit_code=0)


def test_a_500_leaves_its_keep_alive_connection_to_the_next_request() -> None:
    # the 500 was re-raised past the app, and uvicorn dropped the connection: 13 of 20 requests sent
    # on it next were lost (a ReadError in the client)
    import httpx

    from tests.service.conftest import running_server

    sandbox = BuggySandbox(ValueError())
    with running_server(ServiceSettings(), sandbox) as srv, httpx.Client(base_url=srv.url, timeout=10) as http:  # type: ignore[arg-type]
        for _ in range(20):
            boom = http.post("/v1/run", json={"program": {"language": "python", "source": "boom"}})
            assert boom.status_code == 500 and "internal error (ValueError)" in boom.json()["error"]
            ok = http.post("/v1/run", json={"program": {"language": "python", "source": "print(1)"}})
            assert ok.status_code == 200 and ok.json()["stdout"] == "1\n"


def test_text_that_is_no_text_is_the_callers_error() -> None:
    app = create_app(ServiceSettings(), sandbox=BuggySandbox(ValueError()))  # type: ignore[arg-type]
    lone, run = "\ud800", {"language": "python", "source": ""}
    bodies = [("/v1/run", {"program": {**run, "source": f"print(1){lone}"}}),
              ("/v1/run", {"program": {**run, "env": {"A": lone}}}),
              ("/run_code", {"code": "print(1)", "language": "python", "stdin": lone}),
              ("/v1/batch", {"program": run, "cases": [{"stdin": lone}]}),
              ("/v1/batch", {"program": run, "cases": [{"args": [lone]}]})]  # fmt: skip
    with TestClient(app, raise_server_exceptions=False) as client:
        for path, body in bodies:  # (as JSON sends it: "\ud800", escaped)
            r = client.post(path, content=json.dumps(body), headers={"content-type": "application/json"})
            assert r.status_code in (400, 422) and "lone surrogate" in r.json()["error"], (path, r.text)


def test_a_token_a_header_cannot_carry_is_refused_at_start() -> None:
    with pytest.raises(InputError, match="printable ASCII"):
        ServiceSettings(token="sécret")  # no client could send it: every request had been a 401
    with pytest.raises(InputError, match="printable ASCII"):
        ServiceSettings(token="two words")
