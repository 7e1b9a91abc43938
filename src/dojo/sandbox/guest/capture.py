"""What a run printed and which limit it hit: ``Capture``, the one output pump (stdout and stderr,
each capped), and ``classify_limit``, the one limit classifier, both shared by the two run paths
(a one-shot run, ``guest.oneshot``; a session's exec, ``guest.sessions``); ``stdio_pipe`` and
``open_to_run``, the pipes it reads; and ``read_file``, how a file the request fetches is read. Both read into buffers
that the zygote zeroes once its reply is written: nothing a run printed or wrote stays in the
zygote's memory for a later run to find.

Runs inside the sandbox, in the zygote: standard library only.
"""

from __future__ import annotations

import os
import re

from dojo.sandbox.guest.wire import RunLimits, wipe

OUT_OF_MEMORY_MARKS = (b"MemoryError", b"std::bad_alloc", b"Cannot allocate memory", b"out of memory",
                       b"JavaScript heap out of memory", b"Failed to reserve virtual memory")  # fmt: skip
OUT_OF_MEMORY = re.compile(b"|".join(re.escape(mark) for mark in OUT_OF_MEMORY_MARKS))


def stdio_pipe(openable: bool = True) -> tuple[int, int]:
    """A pipe for a run's standard stream (close-on-exec ends); ``openable``: one the run's own user
    may open again by name (``open_to_run``)."""
    r, w = os.pipe2(os.O_CLOEXEC)
    if openable:
        open_to_run(r)
    return r, w


def open_to_run(*pipes: int) -> None:
    """Each of ``pipes`` (an end of a run's standard stream) one that the run's own user may open
    again by name, ``/dev/stdout`` or ``/proc/self/fd/1``: a pipe the zygote makes is its user's
    with mode 0600, and ``echo x > /dev/stderr``, ``cat /dev/stdin`` or ``open('/dev/stdout', 'w')``
    had failed with "Permission denied" (found 2026-12-06; python3 and bash allow them). Only a
    process that may trace one holding them can reach them by name: the run's own. Never a protected
    run's (a harness's trusted process, whose stdout is its report: a shell check, fresh and so
    dumpable in strict isolation, had its report forged through it by the script it ran)."""
    for fd in pipes:
        os.fchmod(fd, 0o666)


class Capture:
    """A run's stdout and stderr, each kept up to ``cap`` bytes; what goes past is dropped and
    flagged. The one output pump of both run paths (a one-shot run, a session's exec).

    The bytes never pass through an object this process does not zero: they are read straight
    into buffers of ours (no ``os.read`` chunks, no buffer left behind by growing one), which the
    zygote zeroes once the response is written (``Zygote.serve``): a forker or spare forked from
    the zygote later must find no earlier run's output in its memory (a reference's printed
    answers, read by a later candidate of the same task)."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.buffers = {"stdout": bytearray(), "stderr": bytearray()}
        self.lengths = {"stdout": 0, "stderr": 0}
        self.truncated = {"stdout": False, "stderr": False}
        self.dropped: bytearray | None = None  # what is read past the cap, to be dropped

    def drain(self, fd: int, name: str) -> bool:
        """Read what ``fd`` has now into the stream ``name``; False at end of file."""
        while True:
            n = self.lengths[name]
            if n < self.cap:
                buf = self.buffers[name]
                if n == len(buf):
                    buf = self._grow(name, min(self.cap, max(4 * n, 4096)))
                target = memoryview(buf)[n:]
            else:
                if self.dropped is None:
                    self.dropped = bytearray(1 << 16)
                target = memoryview(self.dropped)
            try:
                got = os.readv(fd, [target])
            except BlockingIOError:
                return True
            finally:
                target.release()
            if not got:
                return False
            if n < self.cap:
                self.lengths[name] = n + got
            elif self.dropped is not None:
                self.truncated[name] = True
                self.dropped[:got] = bytes(got)  # (dropped: zeroed at once)

    def _grow(self, name: str, size: int) -> bytearray:
        self.buffers[name] = grown(self.buffers[name], self.lengths[name], size)
        return self.buffers[name]

    @property
    def out(self) -> memoryview:
        return memoryview(self.buffers["stdout"])[: self.lengths["stdout"]]

    @property
    def err(self) -> memoryview:
        return memoryview(self.buffers["stderr"])[: self.lengths["stderr"]]

    @property
    def over_cap(self) -> bool:
        return self.truncated["stdout"] or self.truncated["stderr"]


def grown(buf: bytearray, used: int, size: int) -> bytearray:
    """A buffer of ``size`` bytes holding ``buf``'s first ``used``; ``buf`` zeroed (never freed holding
    a run's bytes)."""
    new = bytearray(size)
    new[:used] = buf[:used]
    wipe([buf])
    return new


def read_file(fd: int, max_bytes: int) -> memoryview:
    """Up to ``max_bytes + 1`` bytes of the open regular file ``fd`` (one more than kept tells it was
    truncated), read straight into a buffer of ours, as ``Capture`` reads (a buffer outgrown is
    zeroed): a view of it, which the zygote zeroes after its reply."""
    buf = bytearray(min(os.fstat(fd).st_size, max_bytes) + 1)
    n = 0
    while True:
        if n == len(buf):
            if n > max_bytes:
                break
            buf = grown(buf, n, min(2 * n, max_bytes + 1))
        got = os.readv(fd, [memoryview(buf)[n:]])
        if not got:
            break
        n += got
    return memoryview(buf)[:n]


def classify_limit(
    limit: str | None, lim: RunLimits, *, memory_cgroup: bool, sig: int | None, cpu: float, oom: bool,
    failed: bool, err: bytes | bytearray | memoryview, max_rss: int,
) -> str | None:  # fmt: skip
    """Which limit a run (one-shot, or a session's exec) hit: ``limit`` when the zygote enforced
    one itself (wall, output), else what the facts say. One classifier for both run paths."""
    if limit is not None:
        return limit
    if sig == 24 or cpu > lim["cpu_s"]:  # SIGXCPU, or over its budget
        return "cpu"
    if oom:
        return "memory"
    # Address-space limit (no memory cgroup): a failed allocation shows as the program's own
    # error report, or as a failure after its resident memory came close to the limit.
    if failed and not memory_cgroup and (out_of_memory(err) or max_rss >= 0.75 * lim["memory_bytes"]):
        return "memory"
    if sig == 25:  # SIGXFSZ
        return "file_size"
    return None


def out_of_memory(stderr: bytes | bytearray | memoryview) -> bool:
    """Where memory is an address-space rlimit, a failed allocation shows only in the program's own
    report: a Python MemoryError, a C++ bad_alloc, V8's fatal OOM, a C library's ENOMEM message.
    (Searched in place: no copy of the run's output is made.)"""
    return OUT_OF_MEMORY.search(memoryview(stderr)[-4096:]) is not None
