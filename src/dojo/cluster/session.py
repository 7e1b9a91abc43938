"""``FleetSession``: a session on one node of a fleet; it lives and dies with that node."""

from __future__ import annotations

import contextlib
import time
from typing import TYPE_CHECKING, Any, Self

from dojo.cluster.member import FleetNode, NodeLost, call_node
from dojo.sandbox.languages import Language
from dojo.sandbox.limits import Limits
from dojo.sandbox.result import ExecutionResult
from dojo.sandbox.session import one_request_at_a_time

if TYPE_CHECKING:
    from dojo.cluster.fleet import SandboxFleet


class FleetSession:
    """A session on one node of a fleet (``dojo.sandbox.backend.SessionAPI``). Its ``id`` names the
    node, so any gateway of the cluster can reach it (``SandboxFleet.attach_session``)."""

    def __init__(self, fleet: SandboxFleet, node: FleetNode, token: str, language: Language, limits: Limits) -> None:
        self.fleet = fleet
        self.node = node
        self.token = token
        self.language = language
        self.limits = limits
        self.id = f"{node.short}-{token}"
        self.execs = 0
        self.last_used = time.monotonic()
        self.closed = False
        self.busy = False

    @property
    def alive(self) -> bool:
        return not self.closed and self.node.state == "ready"

    async def _request(self, method: str, *args: Any) -> Any:
        if not self.closed and self.node.state != "ready":
            await self._end()
            raise NodeLost(f"the node holding this session ({self.node.short}) was lost; the session's state is gone")
        with one_request_at_a_time(self):
            try:
                ref = getattr(self.node.actor, method).remote(self.token, *args)
                return await call_node(self.node, ref, self.fleet.mark_dead)
            except NodeLost:
                await self._end()
                raise

    async def exec(self, code: str, stdin: str = "", limits: Limits | None = None) -> ExecutionResult:
        self.execs += 1
        try:
            result: ExecutionResult = await self._request("session_exec", code, stdin, limits)
        except NodeLost as e:
            return ExecutionResult.from_sandbox_error(str(e), self.language.name)
        return result

    async def write_file(self, path: str, content: bytes, executable: bool = False) -> None:
        await self._request("session_write", path, content, executable)

    async def read_file(self, path: str, max_bytes: int = 16 << 20) -> bytes:
        data: bytes | None = await self._request("session_read", path, max_bytes)
        if data is None:
            raise FileNotFoundError(f"{path}: not found")
        return data

    async def _end(self) -> None:
        if not self.closed:
            self.closed = True
            self.node.sessions = max(0, self.node.sessions - 1)

    async def close(self) -> None:
        if self.closed:
            return
        await self._end()
        if self.node.state == "ready":
            with contextlib.suppress(Exception):
                await call_node(self.node, self.node.actor.session_close.remote(self.token))

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
