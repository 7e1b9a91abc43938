from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
import pytest_asyncio

from dojo.agent.tiny_model import TinyModelSpec, build_tiny_model
from dojo.rewards import Grader
from dojo.sandbox import AsyncSandbox
from tests.sandbox.conftest import SKIP_REASON


@pytest_asyncio.fixture(scope="session")
async def fast_sandbox() -> AsyncIterator[AsyncSandbox]:
    """One warm pool (fast isolation) shared by the tests that just need to run code."""
    if SKIP_REASON:
        pytest.skip(SKIP_REASON)
    async with AsyncSandbox(pool_size=4) as sb:
        yield sb


SMALL = TinyModelSpec(
    hidden_size=32, intermediate_size=64, num_layers=1, num_heads=2, num_kv_heads=1, max_positions=1024
)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random-weight model built locally (nothing downloaded)."""
    return build_tiny_model(tmp_path_factory.mktemp("tiny-model"), SMALL)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve_in_subprocess(*args: str, timeout: float = 120) -> tuple[subprocess.Popen[bytes], str]:
    """``dojo serve ARGS`` in its own process on a free loopback port; returns it and its base URL once healthy."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "dojo.cli", "serve", "--port", str(port), *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"},
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"dojo serve exited: {proc.stderr.read().decode()[-2000:] if proc.stderr else ''}")
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"dojo serve did not start within {timeout:.0f} s")


def stop_subprocess(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="session")
def policy_server(tiny_model_dir: Path) -> Iterator[str]:
    """dojo's OpenAI-compatible server for the tiny model, on loopback; yields its base URL."""
    import uvicorn

    from dojo.agent.hf_policy import HFPolicy
    from dojo.agent.policy_server import create_policy_app

    app = create_policy_app(HFPolicy.from_dir(tiny_model_dir), "tiny")
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the policy server did not start")
        time.sleep(0.02)
    yield f"http://127.0.0.1:{port}/v1"
    server.should_exit = True
    thread.join(timeout=10)


@pytest.fixture
def grader(fast_sandbox: AsyncSandbox) -> Grader:
    """A default grader on the shared sandbox."""
    return Grader(fast_sandbox)
