"""The one framing of length-prefixed messages between the host and what runs in the sandbox, and
the typed messages of a slot's requests.

A frame: ``>II`` (header length, body length), a JSON header, then the body: blobs, whose lengths
the header lists under ``"blobs"``; other fields refer to blobs by index. Standard library only:
the zygote and the programs a run executes import it inside the sandbox, the host outside.
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Sequence
from typing import Any, NotRequired, TypedDict

FRAME_PREFIX = struct.Struct(">II")
MAX_HEADER = 64 * 1024 * 1024

# The slot's judge (``dojo.sandbox.guest.judge``) and the zygote: a job is the candidate's pid and
# the job's number, with JUDGE_JOB_FDS descriptors (the job, a memfd; the channel's ends, calls out
# and replies in; the report pipe; the run's stderr); the judge answers each job with its number,
# its outcome and the CPU seconds it took.
JUDGE_JOB = struct.Struct("<iI")
JUDGE_JOB_FDS = 5
JUDGE_OUTCOME = struct.Struct("=IBd")
JUDGE_READY = b"r"  # the judge's first message, once it is set up
ANSWERED, GONE, FAILED = 0, 1, 2  # every call answered; the candidate stopped answering; the judge failed


Blob = bytes | bytearray | memoryview


def frame_head(header: dict[str, Any], blobs: Sequence[Blob]) -> bytes:
    """A frame's prefix and header (its blob table added) for ``blobs``, which follow it."""
    lengths = [memoryview(b).nbytes for b in blobs]
    raw = json.dumps({**header, "blobs": lengths}, separators=(",", ":")).encode()
    return FRAME_PREFIX.pack(len(raw), sum(lengths)) + raw


def encode_frame(header: dict[str, Any], blobs: Sequence[Blob]) -> bytes:
    return frame_head(header, blobs) + b"".join(blobs)


def split_blobs(header: dict[str, Any], body: Any) -> list[Any]:
    """The blobs of a frame's ``body`` (bytes, or a memoryview: views of it), by its blob table."""
    blobs = []
    offset = 0
    for length in header.get("blobs", []):
        blobs.append(body[offset : offset + length])
        offset += length
    if offset != len(body):
        raise ValueError("frame body length does not match its blob table")
    return blobs


def decode_frame_body(header_raw: bytes, body: bytes) -> tuple[dict[str, Any], list[bytes]]:
    header = json.loads(header_raw)
    return header, split_blobs(header, body)


def write_frame(fd: int, header: dict[str, Any], blobs: Sequence[Blob]) -> None:
    """``encode_frame(header, blobs)`` written to ``fd`` without joining the blobs into one more copy
    (the zygote's response: its blobs are buffers it zeroes after, ``Zygote.serve``)."""
    parts = [memoryview(frame_head(header, blobs))]
    parts += [memoryview(b).cast("B") for b in blobs if memoryview(b).nbytes]
    while parts:
        n = os.writev(fd, parts[:512])
        while parts and n >= len(parts[0]):
            n -= len(parts.pop(0))
        if n:
            parts[0] = parts[0][n:]


def read_frame_into(fd: int) -> tuple[dict[str, Any], list[Blob]]:
    """``read_frame``, the body read into one buffer of ours: the blobs are views of it, so the
    reader can zero them after (no ``bytes`` copy of them is ever made here)."""
    header, _, blen = read_header(fd)
    body = bytearray(blen)
    read_into(fd, memoryview(body))
    return header, split_blobs(header, memoryview(body))


def wipe(blobs: Sequence[Blob]) -> None:
    """Zero the writable buffers among ``blobs`` (read-only ones, ``bytes``, are left as they are)."""
    for blob in blobs:
        view = memoryview(blob)
        if not view.readonly and view.nbytes:
            view.cast("B")[:] = bytes(view.nbytes)


def read_exact(fd: int, n: int) -> bytes:
    """``n`` bytes from ``fd``; EOFError if it closes first."""
    chunks = []
    while n:
        chunk = os.read(fd, min(n, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def read_header(fd: int, max_header: int = MAX_HEADER) -> tuple[dict[str, Any], bytes, int]:
    """A frame's header (parsed, and as read) and the length of the body after it."""
    hlen, blen = FRAME_PREFIX.unpack(read_exact(fd, FRAME_PREFIX.size))
    if hlen > max_header:
        raise ValueError("header too large")
    raw = read_exact(fd, hlen)
    return json.loads(raw), raw, blen


def read_frame(fd: int) -> tuple[dict[str, Any], list[bytes]]:
    _, raw, blen = read_header(fd)
    return decode_frame_body(raw, read_exact(fd, blen))


def read_into(fd: int, view: memoryview) -> None:
    """Fill ``view`` from ``fd``; EOFError if it closes first."""
    while view:
        n = os.readv(fd, [view[: 1 << 20]])
        if not n:
            raise EOFError
        view = view[n:]


def write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


class RunLimits(TypedDict):
    """A run step's limits, as the host sends them (``dojo.sandbox.runtime``)."""

    wall_s: float
    cpu_s: float
    memory_bytes: int
    output_bytes: int
    processes: int
    file_size_bytes: int
    open_files: int
    stack_bytes: NotRequired[int]  # a stack limit, when the host sets one
    address_space_extra: NotRequired[int]  # a runtime that maps more than it uses (the JVM, Go)


class RunStep(TypedDict, total=False):
    """One step of a request (``runtime.build_request``): a compile or the run."""

    role: str  # "compile" or "run" ("session" for a session's worker)
    limits: RunLimits
    stdin: bool  # whether the step reads the request's stdin
    argv: list[str]  # a program to execve
    inline_python: str  # or Python source run in the forked child (the file under /box)
    args: list[str]
    modules: list[str]  # the modules the run's files provide: a preloaded one of theirs is forgotten
    session_python: bool  # a session's exec, in its persistent interpreter
    code: str  # that exec's source
    cache_code: bool  # keep the compiled code for the next request with the same source
    preload: bool  # run the module's top level once per slot, then call its main()
    protect: bool  # a trusted harness: non-dumpable, signals blocked


class RunReply(TypedDict, total=False):
    """What a run step reports back: the raw facts the host turns into a verdict (``result.py``)."""

    role: str
    exit_code: int | None
    signal: int | None
    wall_s: float
    cpu_s: float
    peak_memory_bytes: int
    limit: str | None
    oom_killed: bool
    stdout_truncated: bool
    stderr_truncated: bool
    exec_error: str | None
    stdout_blob: int  # index of the blob holding the stream
    stderr_blob: int
    session_restarted: bool
    session_ended: bool
