from __future__ import annotations

import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

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
