"""Admission control, auth and bind safety."""

from __future__ import annotations

import concurrent.futures
import time

import httpx
import pytest
from typer.testing import CliRunner

from dojo.cli import app as cli_app
from dojo.service import ServiceSettings
from dojo.service.server import UnsafeBind, check_bind
from tests.service.conftest import running_server

SLEEP = {"program": {"language": "python", "source": "import time\ntime.sleep(1.5)\nprint('done')"}}


def test_full_queue_answers_429_at_once_with_retry_after() -> None:
    with running_server(ServiceSettings(pool_size=1, queue=1)) as srv:
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            futures = [pool.submit(httpx.post, f"{srv.url}/v1/run", json=SLEEP, timeout=30) for _ in range(4)]
            responses = [f.result() for f in futures]
        codes = sorted(r.status_code for r in responses)
        assert codes == [200, 200, 429, 429]
        refused = [r for r in responses if r.status_code == 429]
        served = [r for r in responses if r.status_code == 200]
        for r in refused:
            assert r.headers["Retry-After"] == "1"
            assert "queue is full" in r.json()["error"]
            # refused at once: before any admitted run (each sleeps 1.5 s) could have finished
            assert r.elapsed < min(ok.elapsed for ok in served)
        for r in served:
            assert r.json()["stdout"] == "done\n"


def test_token_is_required_when_set() -> None:
    with running_server(ServiceSettings(pool_size=1, token="s3cret")) as srv:
        body = {"program": {"language": "python", "source": "print(1)"}}
        assert httpx.post(f"{srv.url}/v1/run", json=body).status_code == 401
        bad = httpx.post(f"{srv.url}/v1/run", json=body, headers={"Authorization": "Bearer nope"})
        assert bad.status_code == 401
        ok = httpx.post(f"{srv.url}/v1/run", json=body, headers={"Authorization": "Bearer s3cret"})
        assert ok.status_code == 200 and ok.json()["stdout"] == "1\n"
        assert httpx.get(f"{srv.url}/healthz").status_code == 200


def test_non_loopback_bind_needs_a_token() -> None:
    check_bind("127.0.0.1", None)
    check_bind("::1", None)
    check_bind("0.0.0.0", "token")
    with pytest.raises(UnsafeBind, match="--token"):
        check_bind("0.0.0.0", None)
    result = CliRunner().invoke(cli_app, ["serve", "--host", "0.0.0.0"], env={"DOJO_TOKEN": ""})
    assert result.exit_code == 2
    assert "refusing to bind 0.0.0.0 without a token" in result.output


def test_server_answers_while_a_slow_run_is_in_progress() -> None:
    with running_server(ServiceSettings(pool_size=2, queue=4)) as srv, concurrent.futures.ThreadPoolExecutor(2) as pool:
        slow = pool.submit(httpx.post, f"{srv.url}/v1/run", json=SLEEP, timeout=30)
        time.sleep(0.2)
        quick = httpx.post(f"{srv.url}/v1/run", json={"program": {"language": "python", "source": "print(2)"}})
        assert quick.json()["stdout"] == "2\n"
        assert slow.result().json()["stdout"] == "done\n"


def test_client_retries_429_until_admitted() -> None:
    from dojo.client import RetryPolicy, SandboxClient
    from dojo.sandbox import Program

    with running_server(ServiceSettings(pool_size=1, queue=0)) as srv, concurrent.futures.ThreadPoolExecutor(1) as pool:
        busy = pool.submit(httpx.post, f"{srv.url}/v1/run", json=SLEEP, timeout=30)
        # the busy run admitted before the client asks (a fixed sleep left it a race under load)
        deadline = time.monotonic() + 10
        while httpx.get(f"{srv.url}/healthz").json()["admitted"] < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert httpx.get(f"{srv.url}/healthz").json()["admitted"] >= 1, "the busy run was never admitted"
        with SandboxClient(srv.url, retry=RetryPolicy(attempts=20, budget=30)) as client:
            r = client.run(Program(language="python", source="print('admitted')"))
            assert r.stdout == "admitted\n"
            assert client.retries >= 1  # it was refused at least once, then retried
        assert busy.result().status_code == 200


def test_serve_dumps_every_threads_stack_on_sigusr1_and_goes_on() -> None:
    import signal

    from tests.conftest import serve_in_subprocess, stop_subprocess

    proc, url = serve_in_subprocess("--pool-size", "1")
    try:
        proc.send_signal(signal.SIGUSR1)
        time.sleep(0.5)
        assert httpx.get(f"{url}/healthz", timeout=10).status_code == 200  # still serving
    finally:
        stop_subprocess(proc)
    assert proc.stderr is not None
    log = proc.stderr.read().decode(errors="replace")
    assert "most recent call first" in log and 'File "' in log, log[-2000:]
    assert "uvicorn" in log  # the stacks of the serving thread, not an empty dump
