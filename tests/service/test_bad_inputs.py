"""Bad input gets a 4xx with a message that says what was wrong; schemathesis finds no 5xx."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error

from tests.conftest import serve_in_subprocess, stop_subprocess
from tests.sandbox.conftest import SKIP_REASON


@pytest.mark.parametrize(
    ("path", "body", "status", "needle"),
    [
        ("/v1/run", {"program": {"language": "cobol", "source": "x"}}, 400, "unknown language"),
        ("/v1/run", {"program": {"language": "python", "source": "x"}, "limits": {"wall_time": -1}}, 422, "wall_time"),
        ("/v1/run", {"program": {"language": "python", "source": "x"}, "limits": {"memory": 0}}, 422, "memory"),
        (
            "/v1/run",
            {"program": {"language": "python", "source": "x", "files": [{"path": "../e", "content": ""}]}},
            422,
            "inside the work dir",
        ),
        (
            "/v1/run",
            {"program": {"language": "python", "source": "x", "fetch": ["../etc/passwd"]}},
            422,
            "inside the work dir",
        ),
        (
            "/v1/run",
            {"program": {"language": "python", "source": "x", "files": [{"path": "a", "content": "%%%"}]}},
            422,
            "base64",
        ),
        ("/v1/run", {"program": {"language": "python"}}, 422, "source"),
        (
            "/v1/run",
            {"program": {"language": "python", "source": "x"}, "limits": {"wall_time": 10000}},
            422,
            "wall_time",
        ),
        ("/v1/batch", {"cases": [{"stdin": "1"}]}, 422, "either 'program'"),
        ("/run_code", {"code": "x", "language": "python", "files": {"a": "!!"}}, 422, "base64"),
        (
            "/run_code",
            {"code": "x", "language": "python", "fetch_files": ["../../etc/shadow"]},
            422,
            "inside the work dir",
        ),
        ("/run_code", {"code": "x", "language": "python", "run_timeout": -5}, 422, "run_timeout"),
        ("/run_code", {"code": "x", "language": "python", "memory_limit_MB": -7}, 422, "memory_limit_MB"),
        ("/v1/sessions", {"language": "python", "limits": {"processes": 0}}, 422, "processes"),
        (
            "/v1/run",
            {"program": {"language": "python", "source": "x"}, "limits": {"network": True}},
            400,
            "--allow-network",
        ),
    ],
)
def test_bad_input_is_a_clear_4xx(http: httpx.Client, path: str, body: dict, status: int, needle: str) -> None:
    r = http.post(path, json=body)
    assert r.status_code == status, r.text
    assert needle in r.json()["error"]


def test_not_json_is_422(http: httpx.Client) -> None:
    r = http.post("/v1/run", content=b"{not json", headers={"Content-Type": "application/json"})
    assert r.status_code == 422 and "invalid request" in r.json()["error"]


def test_huge_body_is_413(http: httpx.Client) -> None:
    big = b"x" * (33 << 20)
    r = http.post("/v1/run", content=big, headers={"Content-Type": "application/json"})
    assert r.status_code == 413 and "larger than" in r.json()["error"]


@pytest.fixture(scope="module")
def served() -> Iterator[str]:
    """``dojo serve`` in its own process. Not the suite's in-process server: on CPython 3.11 two threads in one
    process that build ASTs at once can raise a spurious SystemError (CPython gh-106905), and hypothesis parses
    source files to describe its strategies while the server's thread parses the code it is sent."""
    if SKIP_REASON:
        pytest.skip(SKIP_REASON)
    proc, url = serve_in_subprocess("--pool-size", "4", "--queue", "64", "--max-sessions", "20")
    try:
        yield url
    finally:
        stop_subprocess(proc)


def test_no_server_errors_on_generated_input(served: str) -> None:
    """Schemathesis generates requests for every operation of the OpenAPI schema: none may get a 5xx."""
    api = schemathesis.openapi.from_url(f"{served}/openapi.json")
    operations = [result.ok() for result in api.get_all_operations()]
    assert len(operations) >= 10
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        def check(case: schemathesis.Case) -> None:
            response = case.call(timeout=60)
            case.validate_response(response, checks=[not_a_server_error])

        check()
