"""A sandbox that keeps every program it is asked to run: tests read what a grading sent into the
sandbox (and what it did not) from it."""

from __future__ import annotations

from typing import Any

from dojo.sandbox import AsyncSandbox, Limits, Program


class Recording:
    """``inner``, keeping each program it runs (in order) in ``programs``; everything else is ``inner``'s."""

    def __init__(self, inner: AsyncSandbox) -> None:
        self.inner = inner
        self.programs: list[Program] = []

    async def run(self, program: Program, limits: Limits | None = None, **kw: Any) -> Any:
        self.programs.append(program)
        return await self.inner.run(program, limits, **kw)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
