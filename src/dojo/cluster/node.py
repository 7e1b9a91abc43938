"""One Ray node's sandbox: ``SandboxNode``, the actor that owns that node's warm pool and sessions.

The fleet places one per node by node id (``NodeAffinitySchedulingStrategy``, never by IP: two
nodes may share an address) and calls it with batches of runs, so that Ray's per-call cost is paid
once per batch, not once per run. The actor is plain Python: ``ray.remote`` wraps it where the fleet
creates it, and the tests call it directly too.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import secrets
import socket
import time
from dataclasses import dataclass

from dojo.errors import InputError
from dojo.sandbox.backend import Isolation
from dojo.sandbox.errors import SandboxError
from dojo.sandbox.limits import Limits
from dojo.sandbox.program import Program
from dojo.sandbox.result import ExecutionResult
from dojo.sandbox.runtime import AsyncSandbox
from dojo.sandbox.session import Session

LATENCY_WINDOW = 256  # recent runs whose latency and errors a node reports


@dataclass(frozen=True)
class RunCall:
    """One ``AsyncSandbox.run`` call, as it crosses to a node."""

    program: Program
    limits: Limits | None = None
    compile_limits: Limits | None = None
    isolation: Isolation | None = None
    cache_compiled: bool = False
    harness: bool = False


@dataclass(frozen=True)
class RunOutcome:
    """A run's result, or the caller's input error (an unknown language, a bad file name)."""

    result: ExecutionResult | None = None
    input_error: str | None = None


@dataclass(frozen=True)
class NodeStats:
    """What a node says of its load: runs in it now (from every caller), recent latency and errors."""

    node_id: str
    hostname: str
    pid: int
    slots: int
    inflight: int
    sessions: int
    runs: int
    sandbox_errors: int
    p50_seconds: float
    recent_error_rate: float
    uptime: float


@dataclass
class _SessionEntry:
    session: Session
    ttl: float
    language: str
    limits: Limits


class SandboxNode:
    """The sandbox of one node. ``start`` first (it raises ``IsolationUnavailable`` on a node that
    cannot isolate runs); then ``run_batch`` and the session calls."""

    def __init__(self, node_id: str, pool_size: int | None = None, session_ttl: float = 600.0) -> None:
        self.node_id = node_id
        self.pool_size = pool_size
        self.session_ttl = session_ttl
        self.sandbox: AsyncSandbox | None = None
        self._sessions: dict[str, _SessionEntry] = {}
        self._latency: collections.deque[float] = collections.deque(maxlen=LATENCY_WINDOW)
        self._errors: collections.deque[bool] = collections.deque(maxlen=LATENCY_WINDOW)
        self._inflight = 0
        self._runs = 0
        self._sandbox_errors = 0
        self._started_at = time.monotonic()
        self._reaper: asyncio.Task[None] | None = None

    async def start(self) -> int:
        """Start the warm pool; returns its slots."""
        if self.sandbox is None:
            sandbox = AsyncSandbox(pool_size=self.pool_size)
            await sandbox.start()
            self.sandbox = sandbox
            self._reaper = asyncio.create_task(self._expire_sessions())
        return self.sandbox.pool_size

    def _sb(self) -> AsyncSandbox:
        if self.sandbox is None:
            raise SandboxError(f"the sandbox node {self.node_id[:12]} is not started")
        return self.sandbox

    async def ping(self) -> str:
        return self.node_id

    async def run_batch(self, calls: list[RunCall]) -> list[RunOutcome]:
        """Run every call concurrently on this node's pool; outcomes in call order."""
        return list(await asyncio.gather(*(self._run(call) for call in calls)))

    async def _run(self, call: RunCall) -> RunOutcome:
        sandbox = self._sb()
        self._inflight += 1
        t0 = time.monotonic()
        try:
            result = await sandbox.run(
                call.program,
                call.limits,
                compile_limits=call.compile_limits,
                isolation=call.isolation,
                cache_compiled=call.cache_compiled,
                harness=call.harness,
            )
        except InputError as e:
            return RunOutcome(input_error=str(e))
        finally:
            self._inflight -= 1
        failed = result.sandbox_error is not None
        self._runs += 1
        self._sandbox_errors += failed
        self._latency.append(time.monotonic() - t0)
        self._errors.append(failed)
        return RunOutcome(result=result)

    async def stats(self) -> NodeStats:
        lat = sorted(self._latency)
        return NodeStats(
            node_id=self.node_id,
            hostname=socket.gethostname(),
            pid=os.getpid(),
            slots=self.sandbox.pool_size if self.sandbox else 0,
            inflight=self._inflight,
            sessions=len(self._sessions),
            runs=self._runs,
            sandbox_errors=self._sandbox_errors,
            p50_seconds=lat[len(lat) // 2] if lat else 0.0,
            recent_error_rate=sum(self._errors) / len(self._errors) if self._errors else 0.0,
            uptime=time.monotonic() - self._started_at,
        )

    # Sessions: a token per session; the fleet names it with this node's id.

    async def open_session(
        self, language: str, limits: Limits | None, ttl: float | None = None, environment: str | None = None
    ) -> str:
        sandbox = self._sb()
        session = await sandbox.open_session(language, limits, environment)
        token = secrets.token_hex(12)
        self._sessions[token] = _SessionEntry(session, ttl or self.session_ttl, language, session.limits)
        return token

    def _session(self, token: str) -> Session:
        entry = self._sessions.get(token)
        if entry is None or not entry.session.alive:
            self._sessions.pop(token, None)
            raise SandboxError(f"no live session {token[:8]}... on node {self.node_id[:12]} (closed or expired)")
        return entry.session

    async def session_info(self, token: str) -> tuple[str, Limits, int, float]:
        """language, limits, execs and idle seconds of a live session."""
        s = self._session(token)
        entry = self._sessions[token]
        return entry.language, entry.limits, s.execs, time.monotonic() - s.last_used

    async def session_exec(self, token: str, code: str, stdin: str, limits: Limits | None) -> ExecutionResult:
        return await self._session(token).exec(code, stdin, limits)

    async def session_write(self, token: str, path: str, content: bytes, executable: bool) -> None:
        await self._session(token).write_file(path, content, executable)

    async def session_read(self, token: str, path: str, max_bytes: int) -> bytes | None:
        """The file's bytes, or None when it is missing (FileNotFoundError does not cross Ray well)."""
        try:
            return await self._session(token).read_file(path, max_bytes)
        except FileNotFoundError:
            return None

    async def session_close(self, token: str) -> None:
        entry = self._sessions.pop(token, None)
        if entry is not None:
            await entry.session.close()

    async def _expire_sessions(self) -> None:
        """Sessions idle past their ttl end here too, so a gateway that died leaks nothing."""
        while True:
            await asyncio.sleep(max(0.5, min(self.session_ttl / 10, 5.0)))
            now = time.monotonic()
            for token, entry in list(self._sessions.items()):
                s = entry.session
                if not s.alive or (now - s.last_used > entry.ttl and not s.busy):
                    with contextlib.suppress(Exception):
                        await self.session_close(token)

    async def close(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
        for token in list(self._sessions):
            with contextlib.suppress(Exception):
                await self.session_close(token)
        sandbox, self.sandbox = self.sandbox, None
        if sandbox is not None:
            await sandbox.close()
