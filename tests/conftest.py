from __future__ import annotations

import asyncio
import contextlib
import faulthandler
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Generator, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio

from dojo.agent.tiny_model import TinyModelSpec, build_tiny_model
from dojo.rewards import Grader
from dojo.sandbox import AsyncSandbox
from tests.leaks import PoolRegistry, Snapshot, become_subreaper, children, describe_process, leaks_since
from tests.parallel import (
    WORKER,
    has_workers,
    make_scheduler,
    own_temp_dir,
    place,
    remove_temp_dir,
    remove_workers_temp_dirs,
    send_leftovers,
    take_leftovers,
)
from tests.sandbox.conftest import SKIP_REASON

# --- Never hang, never leak (issue #32) -------------------------------------------------------------
# A test that runs past its limit is failed by pytest-timeout (SIGALRM, needs the GIL). A test that
# froze the whole process (GIL held, as a fork under uvloop once did) is caught by faulthandler's
# watchdog, a C thread: WATCHDOG_MARGIN_S after the limit it dumps every thread's stack to the real
# stderr and exits the run with status 1.
WATCHDOG_MARGIN_S = 60
EXITING_GRACE_S = 5.0  # how long the session's end waits for a process that is exiting
SESSION_LOOP_WORKERS = min(32, (os.cpu_count() or 1) + 4)  # asyncio's own default size
POOLS = PoolRegistry()
_WATCHDOG_FD: dict[str, int] = {}
_OWN_TEMP: list[Path | None] = []


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    _OWN_TEMP.append(own_temp_dir())  # a worker's own TMPDIR (tests/parallel.py), before any test's use
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")  # nothing leaves the machine (nor starts a thread)
    become_subreaper()  # a double-forked process of a test's comes back to us and is seen
    POOLS.install()
    _WATCHDOG_FD["fd"] = os.dup(2)  # before capture: the terminal or CI's log


def pytest_unconfigure(config: pytest.Config) -> None:
    for path in _OWN_TEMP:
        remove_temp_dir(path)
    remove_workers_temp_dirs()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    place(items)


def _limit_s(item: pytest.Item) -> float:
    marker = item.get_closest_marker("timeout")
    if marker is not None and marker.args:
        return float(marker.args[0])
    return float(item.config.getini("timeout") or 300)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, None, None]:
    faulthandler.dump_traceback_later(_limit_s(item) + WATCHDOG_MARGIN_S, exit=True, file=_WATCHDOG_FD["fd"])
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Every session fixture is torn down by now: no process of the suite's may be left. One still
    exiting (its memory released, so an empty command line; a slot's last process as its pool
    closes) is given a bounded moment: the rootless rerun had once named such a process a leak.
    With workers, each worker checks its own and sends what it found to the controller (the
    controller's own children are the workers), which fails the run for it."""
    if has_workers(session.config):
        left = WORKERS_LEFT
    else:
        deadline = time.monotonic() + EXITING_GRACE_S
        while (alive := {pid for pid, state in children().items() if state != "Z"}) and time.monotonic() < deadline:
            time.sleep(0.05)
        left = [describe_process(pid) for pid in sorted(alive)]
        for pid in alive:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 9)
        send_leftovers(session.config, LEAKS, left)
    if left and not WORKER:
        lines = "\n  ".join(left)
        session.config.get_terminal_writer().line(f"processes left behind by the test session:\n  {lines}", red=True)
        if LEAK_MODE != "report":
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


WORKERS_LEFT: list[str] = []  # (the controller's: what its workers' sessions left)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    leaks, left = take_leftovers(node)
    LEAKS.extend(leaks)
    WORKERS_LEFT.extend(left)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    return make_scheduler(config, log)


@pytest_asyncio.fixture(scope="session", autouse=True)
async def session_loop_executor() -> AsyncIterator[None]:
    """The session loop's default executor, with all its threads started before the first test (they
    live as long as the loop: the leak check below knows them by their name)."""
    executor = ThreadPoolExecutor(SESSION_LOOP_WORKERS, thread_name_prefix="asyncio-session")
    barrier = threading.Barrier(SESSION_LOOP_WORKERS)
    for future in [executor.submit(barrier.wait, 30) for _ in range(SESSION_LOOP_WORKERS)]:
        future.result(timeout=60)
    asyncio.get_running_loop().set_default_executor(executor)
    yield


# What a leak does to its test: by default (DOJO_LEAKS=fail) it fails the test that leaked, naming
# what it left, and kills its processes so that the next test is not blamed for them;
# DOJO_LEAKS=report lists the leaks at the end of the run instead (the whole suite leaked nothing on
# 2026-12-03: issue #32).
LEAK_MODE = os.environ.get("DOJO_LEAKS", "fail")
LEAKS: list[str] = []


@pytest.fixture(autouse=True)
def no_leaks(request: pytest.FixtureRequest) -> Iterator[None]:
    """Names what a test leaves behind (thread, process, slot pool, listening socket, temporary
    entry) after its own fixtures were torn down, and fails the test for it (see LEAK_MODE)."""
    fail = LEAK_MODE != "report"
    before = Snapshot.take(POOLS)
    yield
    leaked, _ = leaks_since(before, POOLS, kill=fail)
    if not leaked:
        return
    if fail:
        pytest.fail("left behind by this test:\n  " + "\n  ".join(leaked), pytrace=False)
    LEAKS.append(f"{request.node.nodeid}: " + "; ".join(line.splitlines()[0] for line in leaked))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if LEAKS:
        terminalreporter.section(f"left behind by {len(LEAKS)} test(s)")
        for line in LEAKS:
            terminalreporter.line(line[:400])


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


def serve_in_subprocess(
    *args: str, command: str = "serve", health: str = "/healthz", timeout: float = 120
) -> tuple[subprocess.Popen[bytes], str]:
    """``dojo COMMAND ARGS`` (``dojo serve`` by default) in its own process on a free loopback port;
    returns it and its base URL once ``health`` answers 200."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "dojo.cli", command, "--port", str(port), *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"},
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"dojo {command} exited: {proc.stderr.read().decode()[-2000:] if proc.stderr else ''}")
        try:
            if httpx.get(url + health, timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    proc.kill()
    proc.wait()
    raise RuntimeError(f"dojo {command} did not start within {timeout:.0f} s")


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
    url = f"http://127.0.0.1:{port}/v1"
    # One generation now starts the server loop's executor thread (generation runs there), which
    # lives as long as the server: started by the first test to use it, it would look like its leak.
    body = {"model": "tiny", "prompt": "hi", "max_tokens": 1}
    httpx.post(f"{url}/completions", json=body, timeout=60).raise_for_status()
    yield url
    server.should_exit = True
    thread.join(timeout=10)


@pytest.fixture
def grader(fast_sandbox: AsyncSandbox) -> Grader:
    """A default grader on the shared sandbox."""
    return Grader(fast_sandbox)
