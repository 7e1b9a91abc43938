"""The native API end to end, through a real uvicorn server on a loopback port."""

from __future__ import annotations

import base64

import httpx

from dojo.client import AsyncSandboxClient, SandboxClient
from dojo.sandbox import Limits, Program, Verdict
from tests.service.conftest import LiveServer


def test_run_returns_result_and_request_id(http: httpx.Client) -> None:
    r = http.post(
        "/v1/run",
        json={"program": {"language": "python", "source": "print(input()[::-1])", "stdin": "abc"}},
        headers={"X-Request-ID": "trace-me"},
    )
    assert r.status_code == 200
    assert r.headers["x-request-id"] == "trace-me"
    body = r.json()
    assert body["verdict"] == "Accepted" and body["stdout"] == "cba\n"


def test_limit_verdict_over_http(http: httpx.Client) -> None:
    r = http.post(
        "/v1/run",
        json={"program": {"language": "python", "source": "while True: pass"}, "limits": {"cpu_time": 1}},
    )
    assert r.json()["verdict"] == "TimeLimitExceeded" and r.json()["limit"] == "cpu_time"


def test_files_and_fetch_are_base64(http: httpx.Client) -> None:
    content = base64.b64encode(b"7\n").decode()
    r = http.post(
        "/v1/run",
        json={
            "program": {
                "language": "python",
                "source": "n = int(open('in.txt').read())\nopen('out.bin', 'wb').write(bytes([n, 255]))",
                "files": [{"path": "in.txt", "content": content}],
                "fetch": ["out.bin"],
            }
        },
    )
    body = r.json()
    assert body["verdict"] == "Accepted", body
    assert base64.b64decode(body["files"]["out.bin"]["content"]) == bytes([7, 255])


def test_batch_cases_in_order_with_expected_output(http: httpx.Client) -> None:
    cases = [{"stdin": str(i), "expected_stdout": str(i * i if i != 3 else 0)} for i in range(6)]
    r = http.post(
        "/v1/batch",
        json={"program": {"language": "python", "source": "n = int(input())\nprint(n * n)"}, "cases": cases},
    )
    body = r.json()
    verdicts = [item["result"]["verdict"] for item in body["results"]]
    assert verdicts == ["Accepted"] * 3 + ["WrongAnswer"] + ["Accepted"] * 2
    assert [item["index"] for item in body["results"]] == list(range(6))
    assert body["accepted"] == 5 and body["total"] == 6


def test_batch_stop_on_first_failure_skips_the_rest(http: httpx.Client) -> None:
    cases = [{"stdin": "1", "expected_stdout": "1"}, {"stdin": "2", "expected_stdout": "3"}, {"stdin": "3"}]
    r = http.post(
        "/v1/batch",
        json={
            "program": {"language": "python", "source": "print(input())"},
            "cases": cases,
            "stop_on_first_failure": True,
        },
    )
    items = r.json()["results"]
    assert items[0]["result"]["verdict"] == "Accepted"
    assert items[1]["result"]["verdict"] == "WrongAnswer"
    assert items[2]["skipped"] is True and items[2]["result"] is None


def test_batch_of_programs(http: httpx.Client) -> None:
    programs = [{"language": "python", "source": f"print({i})"} for i in range(10)]
    r = http.post("/v1/batch", json={"programs": programs})
    assert [item["result"]["stdout"] for item in r.json()["results"]] == [f"{i}\n" for i in range(10)]


def test_sync_client_mirrors_the_library(live: LiveServer) -> None:
    with SandboxClient(live.url) as client:
        r = client.run(Program(language="c", source='#include <stdio.h>\nint main(){puts("c");}'))
        assert r.verdict is Verdict.ACCEPTED and r.stdout == "c\n"
        r = client.run(Program(language="python", source="import time; time.sleep(3)"), Limits(wall_time=0.3))
        assert r.verdict is Verdict.TIME_LIMIT_EXCEEDED
        assert client.retries == 0  # a user verdict is never retried
        assert client.health()["status"] == "ok"


async def test_async_client_runs_many(live: LiveServer) -> None:
    async with AsyncSandboxClient(live.url) as client:
        results = await client.run_many([Program(language="python", source=f"print({i} + 1)") for i in range(32)])
    assert [r.stdout for r in results] == [f"{i + 1}\n" for i in range(32)]


def test_metrics_count_runs_by_verdict(http: httpx.Client) -> None:
    http.post("/v1/run", json={"program": {"language": "python", "source": "raise SystemExit(2)"}})
    text = http.get("/metrics").text
    assert 'dojo_runs_total{language="python",verdict="RuntimeError"}' in text
    assert "dojo_request_seconds_bucket" in text
    assert "dojo_live_sessions" in text and "dojo_queue_depth" in text and "dojo_slot_restarts" in text


def test_openapi_documents_the_endpoints(http: httpx.Client) -> None:
    paths = http.get("/openapi.json").json()["paths"]
    endpoints = ["/v1/run", "/v1/batch", "/v1/sessions", "/v1/sessions/{sid}/exec", "/run_code", "/run_jupyter"]
    for p in [*endpoints, "/healthz", "/metrics"]:
        assert p in paths


def test_batch_function_calls_compare_return_values_outside(http: httpx.Client) -> None:
    source = "def add(a, b=0):\n    return a + b\n\ndef broken(x):\n    return object()\n\ndef same(x):\n    return x\n"
    cases = [
        {"call": {"function": "add", "args": [1, 2]}, "expected_return": 3},
        {"call": {"function": "add", "args": [[1], [2]]}, "expected_return": [1, 2]},
        {"call": {"function": "add", "args": [2], "kwargs": {"b": 5}}, "expected_return": 8},
        {"call": {"function": "broken", "args": [1]}},
        {"call": {"function": "add", "args": ["a", "b"]}},
        {"call": {"function": "add", "args": [{"$t": [1]}, {"$t": [2]}]}, "expected_return": [1, 2]},
        {"call": {"function": "same", "args": [True]}, "expected_return": 1},
        {"call": {"function": "add", "args": [0.1, 0.2]}, "expected_return": 0.3},
    ]
    r = http.post("/v1/batch", json={"program": {"language": "python", "source": source}, "cases": cases})
    items = r.json()["results"]
    assert [i["result"]["verdict"] for i in items] == [
        "Accepted",
        "Accepted",
        "WrongAnswer",
        "RuntimeError",
        "Accepted",
        "WrongAnswer",
        "WrongAnswer",
        "Accepted",
    ]  # fmt: skip  (a tuple is not a list, True is not 1, floats within the tolerance)
    assert [i["return_value"] for i in items][:6] == [3, [1, 2], 7, None, "ab", {"$t": [1, 2]}]
    assert "must be builtin data" in items[3]["result"]["stderr"]
    assert "zygote" not in items[3]["result"]["stderr"]  # the traceback starts at the program
    assert items[0]["result"]["files"] == {}  # the harness's file is not shown


def test_function_calls_need_python(http: httpx.Client) -> None:
    r = http.post(
        "/v1/batch",
        json={"program": {"language": "bash", "source": "true"}, "cases": [{"call": {"function": "f"}}]},
    )
    assert r.status_code == 422 and "need a python program" in r.json()["error"]
