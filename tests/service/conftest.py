from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
import uvicorn

from dojo.sandbox import AsyncSandbox
from dojo.service import ServiceSettings, create_app
from tests.sandbox.conftest import SKIP_REASON


@dataclass
class LiveServer:
    url: str
    app: object
    settings: ServiceSettings


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(
    settings: ServiceSettings, sandbox: AsyncSandbox | None = None
) -> tuple[LiveServer, uvicorn.Server, threading.Thread]:
    if SKIP_REASON:
        pytest.skip(SKIP_REASON)
    app = create_app(settings, sandbox, close_sandbox=True)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.05)
    else:  # pragma: no cover
        server.should_exit = True
        thread.join(timeout=30)
        raise RuntimeError("server did not start")
    return LiveServer(url, app, settings), server, thread


@contextlib.contextmanager
def running_server(settings: ServiceSettings, sandbox: AsyncSandbox | None = None) -> Iterator[LiveServer]:
    """A real uvicorn server on a free loopback port, stopped (and its sandbox, its own or the one
    given, closed) on exit."""
    srv, server, thread = start_server(settings, sandbox)
    try:
        yield srv
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        assert not thread.is_alive(), "the server did not stop within 30 s (its sandbox may not have closed)"


@pytest.fixture(scope="session")
def live() -> Iterator[LiveServer]:
    """The shared server of the suite, serving a real sandbox pool."""
    with running_server(ServiceSettings(pool_size=4, queue=64, max_sessions=20, session_ttl=600)) as srv:
        yield srv


@pytest.fixture
def http(live: LiveServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=live.url, timeout=60) as client:
        yield client
