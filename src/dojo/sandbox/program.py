"""What to run: source in a language, stdin, input files, files to fetch back."""

from __future__ import annotations

import base64
import binascii
import posixpath
from collections.abc import Iterable
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer, WithJsonSchema, field_validator

from dojo.errors import InputError
from dojo.sandbox.limits import Limits

MAX_PATH = 255
NAME_MAX = 255  # bytes in one name of a path (Linux's NAME_MAX)
MAX_INPUT_NODES = 3072  # of the 4,096 inodes of a run's work dir (guest.jail.mount_scratch); the rest are the run's
PAGE = 4096
SCRATCH = ("/box", "/tmp", "/dev", "/proc")  # a run's own space: wiped or made fresh for each run


def in_scratch(path: str) -> bool:
    """Whether an absolute ``path`` lies in a run's own space (``SCRATCH``)."""
    return any(path == d or path.startswith(d + "/") for d in SCRATCH)


def check_relative_path(path: str, within: str = "the work dir") -> str:
    """A path inside ``within`` (the work dir): relative, no '..', no NUL, not empty, UTF-8, each
    name at most ``NAME_MAX`` bytes (a longer one failed the run as the sandbox's error: an agent's
    file of 200 "é" turned its episode's 0 into no reward)."""
    if not path or "\x00" in path:
        raise InputError("file path must be a non-empty string without NUL bytes")
    if len(path) > MAX_PATH:
        raise InputError(f"file path longer than {MAX_PATH} characters")
    check_text(path, f"file path {path!r}")
    names = [name.encode() for name in path.split("/")]
    if any(len(name) > NAME_MAX for name in names):
        raise InputError(f"file path {path!r} has a name longer than {NAME_MAX} bytes (UTF-8)")
    if path.startswith("/"):
        raise InputError(f"file path {path!r} must be relative to {within}, not absolute")
    norm = posixpath.normpath(path)
    if norm == "." or norm.startswith("../") or norm == ".." or "/../" in f"/{path}/":
        raise InputError(f"file path {path!r} must stay inside {within} (no '..')")
    return norm


def parent_dirs(path: str) -> list[str]:
    """The directories ``path`` lies in, within the work dir (``a/b/c``: ``a``, ``a/b``)."""
    parts = path.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]


def check_layout(paths: Iterable[str]) -> None:
    """``InputError`` where one of ``paths`` needs another to be a directory (``a`` and ``a/b``; a
    program's ``main.py`` and ``main.py/x``), or where they make more files and directories than
    ``MAX_INPUT_NODES``: the run could not lay them out, which failed as the sandbox's error, not the
    input's (an agent's episode ended without a reward; 5,000 files over HTTP were a SandboxError,
    retried by the client)."""
    names = set(paths)
    for path in names:
        if parent := next((d for d in parent_dirs(path) if d in names), None):
            raise InputError(f"files {parent!r} and {path!r}: {parent!r} cannot be a file and a directory")
    nodes = len(names) + len({d for path in names for d in parent_dirs(path)})
    if nodes > MAX_INPUT_NODES:
        raise InputError(f"the input files make {nodes} files and directories; a run's work dir takes at most "
                         f"{MAX_INPUT_NODES} (pack them into an archive that the program unpacks)")  # fmt: skip


def check_fits(sizes: Iterable[int], disk: int) -> None:
    """``InputError`` where files of ``sizes`` bytes (the source and input files) do not fit a work dir
    of ``disk`` bytes (``Limits.disk``; tmpfs gives each file whole pages): the run had failed to
    write them, as the sandbox's error."""
    used = sum(-(-size // PAGE) * PAGE for size in sizes)
    if used > disk:
        raise InputError(f"the source and input files take {used} bytes of the work dir (in {PAGE}-byte pages), "
                         f"more than limits.disk ({disk}): raise limits.disk or send smaller files")  # fmt: skip


def check_work_dir(paths: Iterable[str], sizes: Iterable[int], disk: int) -> None:
    """``check_layout`` and ``check_fits``: a run's own files, laid out in its work dir."""
    check_layout(paths)
    check_fits(sizes, disk)


def check_args(args: list[str]) -> list[str]:
    """Command-line arguments a run can be given: no NUL, and text ``check_text`` takes."""
    if any("\x00" in a for a in args):
        raise InputError("arguments must not contain NUL bytes")
    return [check_text(a, "an argument", raw_bytes=True) for a in args]


def check_text(value: str, what: str, *, raw_bytes: bool = False) -> str:
    """``value`` if it is text that can be encoded (UTF-8; ``raw_bytes``: with Python's
    ``surrogateescape``, as stdin, arguments and the environment are); else ``InputError``. A lone
    surrogate (JSON's ``"\\ud800"``) in a program's source or stdin was a 500 or a SandboxError."""
    if not value.isascii():
        try:
            value.encode("utf-8", "surrogateescape" if raw_bytes else "strict")
        except UnicodeEncodeError as e:
            raise InputError(f"{what} holds {value[e.start]!r} at character {e.start}, a lone surrogate that "
                             "is no text: send valid UTF-8") from None  # fmt: skip
    return value


def check_fetch_path(path: str) -> str:
    """A path to bring back: relative to the work dir, or absolute (read as the run's user, so it
    reaches only what the run itself could read and print)."""
    if path.startswith("/"):
        check_text(path, f"fetch path {path!r}")
        if "\x00" in path or len(path) > MAX_PATH or "/../" in f"{path}/":
            raise InputError(f"fetch path {path!r} must be a plain absolute path (no '..', no NUL)")
        return posixpath.normpath(path)
    return check_relative_path(path)


def _from_base64(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError) as e:
            raise InputError(f"content must be standard base64: {e}") from e
    return value


Base64Bytes = Annotated[
    bytes,
    BeforeValidator(_from_base64),
    PlainSerializer(lambda b: base64.b64encode(b).decode(), return_type=str, when_used="json"),
    WithJsonSchema({"type": "string", "format": "byte", "description": "Standard base64."}),
]
"""Bytes in Python; standard base64 text in JSON (a ``str`` given in Python is decoded as base64)."""


class InputFile(BaseModel):
    """A file placed in the work dir before the run. In JSON, ``content`` is base64."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str = Field(description="Path relative to the work dir.")
    content: Base64Bytes = Field(description="File content (base64 in JSON).")
    executable: bool = False

    @field_validator("path")
    @classmethod
    def _path(cls, v: str) -> str:
        return check_relative_path(v)


class Program(BaseModel):
    """Source code in a language, plus what it reads and what to bring back."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    language: str = Field(max_length=32, description="python, bash, c, cpp or javascript (aliases accepted).")
    source: str = Field(description="The program's source code.")
    stdin: str = Field("", description="Text fed to the program's standard input.")
    files: list[InputFile] = Field(default_factory=list, description="Files placed in the work dir.")
    fetch: list[str] = Field(
        default_factory=list,
        max_length=256,
        description="Paths returned after the run: in the work dir, or absolute (/tmp/x).",
    )
    args: list[str] = Field(default_factory=list, description="Command-line arguments.")
    env: dict[str, str] = Field(default_factory=dict, description="Extra environment variables.")
    environment: str | None = Field(
        None,
        max_length=100,
        pattern=r"^[a-z0-9][a-z0-9_.-]{0,63}(@[0-9a-f]{16})?$",
        description="A Python environment built with 'dojo env build NAME' (NAME, or NAME@VERSION): its "
        "packages are importable and its declared modules already imported.",
    )
    hidden: list[str] = Field(
        default_factory=list,
        max_length=256,
        description="Paths that this run cannot read: each reads as an empty file (or directory), a Python "
        "file's compiled copies too. Relative: inside the run's environment (site-packages/pkg/mod.py); "
        "absolute: in the run's file tree (/usr/lib/python3/dist-packages/pkg/mod.py). A task whose tree "
        "replaces a file hides every other copy of it, so the original is out of the candidate's reach.",
    )
    expected_stdout: str | None = Field(
        None,
        description="If set, an Accepted run whose stdout differs (ignoring whitespace) is WrongAnswer.",
    )

    @field_validator("source")
    @classmethod
    def _source(cls, v: str) -> str:
        return check_text(v, "source")

    @field_validator("stdin")
    @classmethod
    def _stdin(cls, v: str) -> str:
        return check_text(v, "stdin", raw_bytes=True)

    @field_validator("files")
    @classmethod
    def _files(cls, v: list[InputFile]) -> list[InputFile]:
        check_layout(f.path for f in v)
        return v

    @field_validator("fetch")
    @classmethod
    def _fetch(cls, v: list[str]) -> list[str]:
        return [check_fetch_path(p) for p in v]

    @field_validator("hidden")
    @classmethod
    def _hidden(cls, v: list[str]) -> list[str]:
        out = []
        for p in v:
            if p.startswith("/"):
                check_text(p, f"hidden path {p!r}")
                if "\x00" in p or len(p) > MAX_PATH or "/../" in f"{p}/" or p.rstrip("/") == "":
                    raise InputError(f"hidden path {p!r} must be a plain absolute path (no '..', no NUL)")
                p = posixpath.normpath(p)
                if in_scratch(p):
                    raise InputError(f"hidden path {p!r} is in the run's scratch space ({', '.join(SCRATCH)}): "
                                     "nothing there outlives a run, so there is nothing to hide")  # fmt: skip
                out.append(p)
            else:
                out.append(check_relative_path(p, "the environment"))
        return out

    @field_validator("env")
    @classmethod
    def _env(cls, v: dict[str, str]) -> dict[str, str]:
        for key, value in v.items():
            if not key or "=" in key or "\x00" in key or "\x00" in value:
                raise InputError(f"invalid environment variable {key!r}")
            check_text(key, "an environment variable's name", raw_bytes=True)
            check_text(value, f"environment variable {key!r}", raw_bytes=True)
        return v

    @field_validator("args")
    @classmethod
    def _args(cls, v: list[str]) -> list[str]:
        return check_args(v)

    def stdin_bytes(self) -> bytes:
        return self.stdin.encode("utf-8", errors="surrogateescape")


__all__ = [
    "InputFile", "Limits", "Program", "check_args", "check_fetch_path", "check_fits", "check_layout",
    "check_relative_path", "check_text", "check_work_dir", "parent_dirs",
]  # fmt: skip
