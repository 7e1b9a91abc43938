"""Sessions over HTTP: ids, idle expiry, a cap on live sessions, and the /v1/sessions routes."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, HTTPException, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from dojo.errors import DojoError
from dojo.sandbox import ExecutionResult, Limits, SandboxAPI, SandboxError, SessionAPI
from dojo.sandbox.errors import SessionBusy
from dojo.sandbox.program import check_relative_path
from dojo.service.answers import answer_response

log = logging.getLogger(__name__)
MAX_FILE_BYTES = 16 << 20


class SessionLimitReached(DojoError):
    """The service holds its maximum of live sessions."""


class CreateSession(BaseModel):
    model_config = ConfigDict(extra="forbid")

    language: str = Field(max_length=32, description="python (variables persist), bash (cwd and files persist), ...")
    limits: Limits = Field(default_factory=Limits, description="Default limits of each exec; memory is fixed here.")
    ttl: float | None = Field(None, gt=0, le=86400, description="Idle seconds before the session expires.")
    environment: str | None = Field(
        None, max_length=100, description="A Python environment built with 'dojo env build' (NAME or NAME@VERSION)."
    )


class SessionInfo(BaseModel):
    id: str
    language: str
    ttl: float
    idle: float
    execs: int


class ExecRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    code: str
    stdin: str = ""
    limits: Limits | None = None


@dataclass
class Entry:
    session: SessionAPI
    ttl: float


class SessionManager:
    def __init__(self, sandbox: SandboxAPI, max_sessions: int, ttl: float) -> None:
        self.sandbox = sandbox
        self.max_sessions = max_sessions
        self.ttl = ttl
        self._sessions: dict[str, Entry] = {}
        self._pending = 0
        self._starting = asyncio.Semaphore(max(2, 2 * (os.cpu_count() or 1)))
        self._reaper: asyncio.Task[None] | None = None
        self.expired = 0

    @property
    def live(self) -> int:
        return len(self._sessions)

    async def start(self) -> None:
        self._reaper = asyncio.create_task(self._expire_loop())

    async def close(self) -> None:
        if self._reaper:
            self._reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reaper
        await asyncio.gather(*(e.session.close() for e in self._sessions.values()), return_exceptions=True)
        self._sessions.clear()

    async def create(self, req: CreateSession) -> tuple[str, Entry]:
        if len(self._sessions) + self._pending >= self.max_sessions:
            raise SessionLimitReached(
                f"this service holds its maximum of {self.max_sessions} live sessions; "
                "delete sessions you no longer need or retry later"
            )
        self._pending += 1
        try:
            async with self._starting:
                session = await self.sandbox.open_session(req.language, req.limits, req.environment)
        finally:
            self._pending -= 1
        # A fleet's session names its node, so that any gateway of the cluster can reach it.
        sid = str(getattr(session, "id", "") or secrets.token_hex(12))
        entry = Entry(session, min(req.ttl, self.ttl) if req.ttl else self.ttl)
        self._sessions[sid] = entry
        return sid, entry

    async def get(self, sid: str) -> Entry:
        entry = self._sessions.get(sid)
        attach = getattr(self.sandbox, "attach_session", None)
        if entry is None and attach is not None and len(self._sessions) < self.max_sessions:
            session = await attach(sid)  # opened by another gateway of the same cluster
            if session is not None:
                entry = self._sessions[sid] = Entry(session, self.ttl)
        if entry is None or not entry.session.alive:
            if entry is not None:
                self._sessions.pop(sid, None)
            raise HTTPException(404, f"no live session {sid!r} (expired, deleted or never created)")
        return entry

    async def delete(self, sid: str) -> None:
        entry = self._sessions.pop(sid, None)
        if entry is None:
            raise HTTPException(404, f"no live session {sid!r}")
        await entry.session.close()

    async def expire_idle(self) -> int:
        now = time.monotonic()
        stale = [
            sid
            for sid, e in self._sessions.items()
            if not e.session.alive or (now - e.session.last_used > e.ttl and not e.session.busy)
        ]
        for sid in stale:
            entry = self._sessions.pop(sid, None)
            if entry is not None:
                await entry.session.close()
        self.expired += len(stale)
        return len(stale)

    async def _expire_loop(self) -> None:
        while True:
            await asyncio.sleep(max(0.2, min(self.ttl / 10, 5.0)))
            try:
                await self.expire_idle()
            except Exception:  # keep expiring whatever one session did
                log.exception("session expiry failed")


def register_session_routes(
    app: FastAPI,
    sessions: SessionManager,
    answer: Callable[[Request, Limits], None],
    check_limits: Callable[..., None],
) -> None:
    """The session routes. ``answer(request, limits)`` checks and holds what an exec's result may
    take in its answer (``dojo.service.app``): unbounded, an exec printing 32 MiB of NUL on each
    stream was a 384 MiB answer."""

    async def session_busy(request: Request, exc: Exception) -> JSONResponse:
        """A call on a session that serves another request: 409 Conflict (not the request's content,
        the session's state); the same call succeeds once that request has ended."""
        body = {"error": str(exc), "request_id": getattr(request.state, "request_id", None)}
        return JSONResponse(body, status_code=409, headers={"Retry-After": "1"})

    app.add_exception_handler(SessionBusy, session_busy)

    def info(sid: str, entry: Entry) -> SessionInfo:
        s = entry.session
        return SessionInfo(
            id=sid, language=s.language.name, ttl=entry.ttl, idle=time.monotonic() - s.last_used, execs=s.execs
        )

    @app.post("/v1/sessions", response_model=SessionInfo, status_code=201, tags=["sessions"])
    async def create_session(body: CreateSession, request: Request) -> SessionInfo:
        """Open a session (its own slot). 429 when the service holds its maximum of live sessions."""
        check_limits(body.limits)
        if body.limits is not None:
            answer(request, body.limits)  # (limits no exec could answer under are refused now, not at each exec)
        sid, entry = await sessions.create(body)
        return info(sid, entry)

    @app.get("/v1/sessions/{sid}", response_model=SessionInfo, tags=["sessions"])
    async def get_session(sid: str) -> SessionInfo:
        return info(sid, await sessions.get(sid))

    @app.post("/v1/sessions/{sid}/exec", response_model=ExecutionResult, tags=["sessions"])
    async def exec_in_session(sid: str, body: ExecRequest, request: Request) -> Response:
        """Run code in the session: Python variables, bash cwd, and files persist between calls."""
        check_limits(body.limits)
        entry = await sessions.get(sid)
        answer(request, body.limits or entry.session.limits)
        result = await entry.session.exec(body.code, body.stdin, body.limits)
        request.state.verdict = str(result.verdict)
        return answer_response(result.model_dump_json().encode())

    @app.put("/v1/sessions/{sid}/files/{path:path}", tags=["sessions"])
    async def put_file(sid: str, path: str, request: Request) -> dict[str, Any]:
        """Write the request body to PATH in the session's work dir."""
        check_relative_path(path)
        entry = await sessions.get(sid)
        data = await request.body()
        if len(data) > MAX_FILE_BYTES:
            raise HTTPException(413, f"file larger than {MAX_FILE_BYTES} bytes")
        await entry.session.write_file(path, data)
        return {"path": path, "size": len(data)}

    @app.get("/v1/sessions/{sid}/files/{path:path}", tags=["sessions"])
    async def get_file(sid: str, path: str) -> Response:
        """The bytes of PATH in the session's work dir (404 if missing)."""
        check_relative_path(path)
        entry = await sessions.get(sid)
        try:
            data = await entry.session.read_file(path, MAX_FILE_BYTES)
        except FileNotFoundError as e:
            raise HTTPException(404, str(e)) from e
        except SandboxError as e:
            raise HTTPException(503, f"session failed: {e}") from e
        return Response(data, media_type="application/octet-stream")

    @app.delete("/v1/sessions/{sid}", status_code=204, tags=["sessions"])
    async def delete_session(sid: str) -> Response:
        await sessions.delete(sid)
        return Response(status_code=204)
