"""Stateful sessions for multi-turn agents: one slot of its own, files and state kept between execs.

    async with await sandbox.open_session("python") as s:
        await s.exec("x = 21")
        r = await s.exec("print(x * 2)")          # 42: variables persist
        await s.write_file("data.txt", b"...")    # files persist too

Python keeps its variables in a persistent interpreter (a notebook-like worker: the value of a last
bare expression is printed). bash keeps its files and its working directory between execs. Other
languages keep files. A session that hits a limit (or calls ``exit``) loses its interpreter state
but keeps its files; the result says ``session_restarted`` on the next exec.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any, Protocol

from dojo.errors import InputError
from dojo.sandbox.errors import FileRefused, SandboxError, SessionBusy
from dojo.sandbox.languages import Language
from dojo.sandbox.limits import Limits
from dojo.sandbox.program import InputFile, Program, check_relative_path
from dojo.sandbox.result import ExecutionResult, result_from_wire
from dojo.sandbox.slot import Slot, SlotDied

BASH_CWD_FILE = "/tmp/.dojo-session-cwd"


class _Exclusive(Protocol):
    closed: bool
    busy: bool
    last_used: float


@contextlib.contextmanager
def one_request_at_a_time(session: _Exclusive) -> Iterator[None]:
    """A session takes one request at a time, and knows when it was last used (for idle expiry)."""
    if session.closed:
        raise SandboxError("the session is closed")
    if session.busy:
        raise SessionBusy(
            "the session is busy with another request (an exec, or a file written or read); a session "
            "takes one request at a time: retry once that one has ended"
        )
    session.busy = True
    session.last_used = time.monotonic()
    try:
        yield
    finally:
        session.busy = False
        session.last_used = time.monotonic()


def replace_files(header: dict[str, Any]) -> None:
    for f in header.get("files", []):
        f["replace"] = True


def _refusal_hint(refused: str) -> str:
    """What to do about a session file the zygote could not write (``refused``: why)."""
    if "No space left" in refused:
        return (
            "The session's work dir is full (a file is written beside its name, then renamed over it: "
            "rewriting one needs room for both): remove files, or open the session with a larger limits.disk"
        )
    if "Permission denied" in refused:
        return "Its directory must be writable: a file is written beside its name, then renamed over it"
    if ", not a" in refused:
        return ("A session writes regular files only, never through a symlink: remove or rename what its code "
                "left there, then retry")  # fmt: skip
    return "Nothing was written"


class Session:
    """A live session. Create with ``AsyncSandbox.open_session``; one exec at a time."""

    def __init__(self, slot: Slot, language: Language, limits: Limits, build: Any, release: Any) -> None:
        self.slot = slot
        self.language = language
        self.limits = limits
        self._build = build  # runtime.build_request bound to the sandbox's settings
        self._release = release
        self.created = time.monotonic()
        self.last_used = self.created
        self.execs = 0
        self.closed = False
        self.busy = False

    @property
    def alive(self) -> bool:
        return not self.closed and self.slot.alive

    async def _request(
        self, header: dict[str, Any], blobs: list[bytes], timeout: float
    ) -> tuple[dict[str, Any], list[bytes]]:
        with one_request_at_a_time(self):
            try:
                resp, out = await self.slot.request({**header, "keep_files": True}, blobs, timeout)
            except SlotDied:
                await self.close()
                raise
        if refused := resp.get("file_refused"):  # what the session's code left at a file's path: nothing ran
            hint = _refusal_hint(refused)
            raise FileRefused(f"the session's file was not written: {refused}. {hint}")
        return resp, out

    async def exec(self, code: str, stdin: str = "", limits: Limits | None = None) -> ExecutionResult:
        """Run ``code`` in the session. Limits apply to this exec (memory is fixed at creation)."""
        limits = limits or self.limits
        lang = self.language
        built: ExecutionResult | None = None
        if lang.name == "python":
            program = Program(language="python", source="", stdin=stdin)
            header, blobs, timeout = self._build(program, lang, limits)
            header["files"] = []
            run = header["steps"][-1]
            run.pop("inline_python", None)
            run.pop("argv", None)
            run["session_python"] = True
            run["code"] = code
        else:
            source = code
            if lang.name == "bash":
                source = (
                    f'if [ -r {BASH_CWD_FILE} ]; then cd -- "$(cat {BASH_CWD_FILE})" 2>/dev/null; fi\n'
                    f"trap 'pwd > {BASH_CWD_FILE}' EXIT\n{code}\n"
                )
            program = Program(language=lang.name, source=source, stdin=stdin)
            # (the exec's own files are written anew each time: whatever the code left at their
            # names, but a directory, is replaced, not written through; ``write_session_file``)
            if lang.compiled:  # compiled in the session's work dir (files persist), then run there
                header, blobs, timeout = self._build(program, lang, limits, compile_only=True)
                header["fetch"] = []
                replace_files(header)
                try:
                    resp, out = await self._request(header, blobs, timeout)
                except SlotDied as e:
                    return ExecutionResult.from_sandbox_error(f"session lost: {e}", lang.name)
                built = result_from_wire(resp, out, lang.name, compiled=True)
                if built.compile is None or built.compile.exit_code != 0 or built.compile.limit is not None:
                    self.execs += 1
                    return built
            header, blobs, timeout = self._build(program, lang, limits)
            if lang.compiled:
                header["files"] = []  # the compile request wrote them
            replace_files(header)
        self.execs += 1
        try:
            resp, out = await self._request(header, blobs, timeout)
        except SlotDied as e:
            return ExecutionResult.from_sandbox_error(f"session lost: {e}", lang.name)
        result = result_from_wire(resp, out, lang.name, compiled=False)
        if built is not None and built.compile is not None:
            result = result.model_copy(update={"compile": built.compile})
        steps = resp.get("steps") or [{}]
        extra = {k: steps[-1][k] for k in ("session_restarted", "session_ended") if k in steps[-1]}
        return result.model_copy(update=extra) if extra else result

    async def write_file(self, path: str, content: bytes, executable: bool = False) -> None:
        f = InputFile(path=path, content=content, executable=executable)
        header = {"files": [{"path": f.path, "blob": 0, "mode": 0o755 if executable else 0o644}], "steps": []}
        resp, _ = await self._request(header, [f.content], 30.0)
        if resp.get("error"):
            raise InputError(f"could not write {path!r}: {resp['error']}")

    async def read_file(self, path: str, max_bytes: int = 16 << 20) -> bytes:
        """The file's content; FileNotFoundError if it is missing or not readable."""
        path = check_relative_path(path)
        header = {"files": [], "steps": [], "fetch": [path], "fetch_max_bytes": max_bytes}
        resp, out = await self._request(header, [], 30.0)
        if resp.get("error"):
            raise SandboxError(f"zygote: {resp['error']}")
        item = resp["fetched"][0]
        if item.get("blob") is None:
            raise FileNotFoundError(f"{path}: {item.get('error') or 'not found'}")
        data: bytes = out[item["blob"]]
        return data

    async def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        await self._release(self)

    async def __aenter__(self) -> Session:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
