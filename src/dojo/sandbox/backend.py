"""What graders, episodes, the scheduler and the service need of a sandbox: ``SandboxAPI``.

``AsyncSandbox`` (one machine) and ``dojo.cluster.SandboxFleet`` (a Ray cluster) both provide it,
so every caller runs unchanged on either. A session is ``SessionAPI``: ``dojo.sandbox.Session``
locally, ``dojo.cluster.FleetSession`` on a fleet.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal, Protocol, Self

from dojo.sandbox.languages import Language
from dojo.sandbox.limits import Limits
from dojo.sandbox.program import Program
from dojo.sandbox.result import ExecutionResult

Isolation = Literal["fast", "strict"]


class SessionAPI(Protocol):
    """A stateful session: files (and Python variables) persist between execs; one exec at a time."""

    language: Language
    limits: Limits  # each exec's, unless it gives its own
    execs: int
    last_used: float

    @property
    def alive(self) -> bool: ...

    @property
    def busy(self) -> bool: ...

    async def exec(self, code: str, stdin: str = "", limits: Limits | None = None) -> ExecutionResult: ...

    async def write_file(self, path: str, content: bytes, executable: bool = False) -> None: ...

    async def read_file(self, path: str, max_bytes: int = 16 << 20) -> bytes: ...

    async def close(self) -> None: ...


class SandboxAPI(Protocol):
    """Isolated runs: one-shot (``run``, ``run_many``) and stateful (``open_session``)."""

    @property
    def pool_size(self) -> int:
        """Runs it executes at once (its slots); callers size their concurrency from it."""
        ...

    @property
    def started(self) -> bool: ...

    async def start(self) -> Self: ...

    async def close(self) -> None: ...

    async def __aenter__(self) -> Self: ...

    async def __aexit__(self, *exc: object) -> None: ...

    async def run(
        self,
        program: Program,
        limits: Limits | None = None,
        *,
        compile_limits: Limits | None = None,
        isolation: Isolation | None = None,
        cache_compiled: bool = False,
        harness: bool = False,
    ) -> ExecutionResult: ...

    async def run_many(self, programs: Iterable[Program], limits: Limits | None = None) -> list[ExecutionResult]: ...

    async def open_session(
        self, language: str, limits: Limits | None = None, environment: str | None = None
    ) -> SessionAPI: ...
