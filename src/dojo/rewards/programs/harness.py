"""The grading harness: the program of every run that calls a candidate's function (the trust
boundary it keeps is described in ``dojo.rewards.harness``, which builds its jobs and reads its
reports).

Its top level only defines: each slot runs it once (``AsyncSandbox.run(harness=True)``). Where the
slot has its forker, the trusted side is the slot's judge (``dojo.sandbox.guest.judge``), which
calls ``judge_main`` once and grades job after job, and each run's process calls
``candidate_main()``; where the judge cannot be started, the forker makes both of a run's processes
before either runs Python (forker.c's ``split_harness``): the trusted one calls ``main(split)``, the
candidate's ``candidate_main()``. Otherwise (no forker, strict isolation) the run calls ``main()``,
which forks the candidate's process first thing. It carries its shared modules with it
(``dojo.sandbox.bundle``): the value encoding and the framing of its channel, shared with the host,
and how a program's process ends (``dojo.sandbox.guest.ending``), shared with the zygote's runs.
"""

# ruff: noqa: SIM105 (plain try/except: contextlib would be one more module in the sandbox)

from __future__ import annotations

import binascii as _binascii
import builtins as _builtins
import json as _json
import marshal as _marshal
import os as _os
import sys as _sys
from collections.abc import Callable
from typing import Any, NoReturn

from dojo.sandbox.guest.ending import flush_streams, program_error_text
from dojo.sandbox.guest.trusted import make_undumpable, use_trusted_path
from dojo.sandbox.guest.wire import (
    ANSWERED,
    FAILED,
    FRAME_PREFIX,
    GONE,
    JUDGE_JOB,
    JUDGE_JOB_FDS,
    JUDGE_OUTCOME,
    JUDGE_READY,
    read_exact,
    write_all,
)
from dojo.tasks.values import decode_value, encode_value, values_equal

MAX_MESSAGE = 16 << 20  # bytes of one channel message; a longer reply is malformed

CALL_FD, REPLY_FD = 3, 4  # the channel's ends, in the candidate's process


class Malformed(Exception):
    """A message from the candidate's process that is not valid encoded data."""


class CandidateGone(BaseException):
    """The candidate's process ended (or broke the channel): no later call can be answered.
    A BaseException, so that no ``except Exception`` in check code can swallow it."""


class CandidateError(Exception):
    """The candidate's function raised an exception that is not a builtin one."""


def send(fd: int, obj: dict[str, Any]) -> None:
    """One message: a frame of the wire's framing (``dojo.sandbox.guest.wire``) whose header is the
    message's JSON, and no body."""
    data = _json.dumps(obj, allow_nan=False, separators=(",", ":")).encode()
    write_all(fd, FRAME_PREFIX.pack(len(data), 0) + data)


def receive(fd: int) -> bytes | None:
    """One message as raw bytes; None at the end of the channel; Malformed when too long."""
    try:
        length, body = FRAME_PREFIX.unpack(read_exact(fd, FRAME_PREFIX.size))
        if length > MAX_MESSAGE:
            raise Malformed("message of " + str(length) + " bytes")
        if body:
            raise Malformed("a message with a body of " + str(body) + " bytes")
        return read_exact(fd, length)
    except EOFError:
        return None


def ended_by(sig: int) -> str:
    """How a signal that ended the candidate's process is told (after why it stopped answering)."""
    named = {24: "its cpu limit", 25: "its file_size limit"}.get(sig)
    return " (it hit " + named + ")" if named else " (killed by signal " + str(sig) + ")"


def describe(e: BaseException) -> str:
    try:
        return (type(e).__name__ + ": " + str(e))[:500]
    except BaseException:
        return "an exception that cannot be described"


# ------------------------------------------------------------------------------------------------
# The candidate's process. Everything from here on is untrusted: the trusted process believes
# nothing it says without checking it.
# ------------------------------------------------------------------------------------------------


def candidate_process(call_r: int, reply_w: int) -> NoReturn:
    """The candidate's process, forked by the trusted one (``main``): its descriptors and signal
    mask made as a split harness's are (``candidate_main``), then the calls served."""
    import fcntl
    import signal

    try:
        call = fcntl.fcntl(call_r, fcntl.F_DUPFD, 16)
        reply = fcntl.fcntl(reply_w, fcntl.F_DUPFD, 16)
        null = _os.open("/dev/null", _os.O_RDONLY)
        _os.dup2(null, 0)
        _os.dup2(2, 1)  # the report channel is the trusted process's fd 1: never the candidate's
        _os.dup2(call, CALL_FD)
        _os.dup2(reply, REPLY_FD)
        _os.closerange(REPLY_FD + 1, 1 << 16)
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
    except BaseException:
        _os._exit(125)
    _sys.path.insert(0, "/box")  # the trusted process dropped it: the candidate's files import each other
    candidate_main()


def candidate_main() -> NoReturn:
    """The candidate's process, its descriptors set (fd 0 /dev/null, 1 and 2 the run's stderr, the
    channel's ends at CALL_FD and REPLY_FD, no other) and every signal unblocked: serve calls until
    the channel ends. The zygote's forker makes a split harness's candidate process so and calls
    this directly (forker.c, ``split_harness``): /box is already first on its path."""
    try:
        serve_calls()
    except BaseException:
        pass
    _os._exit(0)


def load_solution() -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """Run /box/solution.py as a module: (None, its namespace), or (the load's failure as a reply,
    {})."""
    with open("/box/solution.py", "rb") as f:
        source = f.read()
    ns = {"__name__": "solution", "__file__": "/box/solution.py", "__builtins__": _builtins}
    try:
        code = compile(source, "/box/solution.py", "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as e:
        return {"load": "syntax", "error": describe(e)}, {}
    uncaught: BaseException | None = None
    try:
        exec(code, ns)
    except BaseException as e:
        uncaught = e
    if uncaught is not None:  # (its text made outside the handler, as Python's exit path makes it)
        return {"load": "error", "error": describe(uncaught), "traceback": program_error_text(uncaught)[-2000:]}, {}
    return None, ns


def serve_calls() -> None:
    # The solution loads first, while the trusted process reads its job (on the other core, when
    # there is one); the first message names the function.
    failed, ns = load_solution()
    first = receive(CALL_FD)
    if first is None:
        return
    if failed is not None:
        send(REPLY_FD, failed)
        return
    entry_point = _json.loads(first)["entry_point"]
    fn = ns.get(entry_point)
    if not callable(fn):
        send(REPLY_FD, {"load": "missing", "error": "no function named " + entry_point})
        return
    send(REPLY_FD, {"load": "ok"})
    while True:
        raw = receive(CALL_FD)
        if raw is None:
            return
        message = _json.loads(raw)
        try:
            args = decode_value(message["args"])
            kwargs = decode_value(message["kwargs"])
            answer = {"value": encode_value(fn(*args, **kwargs))}
        except BaseException as e:
            answer = {"error": describe(e)}
        flush_streams()
        send(REPLY_FD, answer)


# ------------------------------------------------------------------------------------------------
# The trusted process.
# ------------------------------------------------------------------------------------------------


def reject_constant(name: str) -> NoReturn:
    raise ValueError("bare " + name + " is not encoded data")


def parse_message(raw: bytes) -> dict[str, Any]:
    """A message from the candidate's process: a non-empty JSON object; Malformed otherwise."""
    try:
        obj = _json.loads(raw.decode("utf-8"), parse_constant=reject_constant)
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise Malformed("not JSON: " + describe(e)) from None
    if type(obj) is not dict or not obj:
        raise Malformed("not a message object")
    return obj


class Candidate:
    """The trusted side of the channel: calls go out as data, answers come back checked."""

    def __init__(self, pid: int, call_w: int, reply_r: int) -> None:
        self.pid, self.call_w, self.reply_r = pid, call_w, reply_r
        self.gone: str | None = None  # why no more calls can be answered
        self.signal: int | None = None  # the signal that ended the candidate's process, if one did
        self.malformed = 0

    def ended(self, why: str, eof: bool = False) -> NoReturn:
        """Stop the candidate's process for good, say why (with how it ended), and raise
        CandidateGone. ``eof``: it closed the channel itself (its exit code is worth telling)."""
        if self.gone is None:
            self.gone = why
            try:
                _os.kill(self.pid, 9)
            except OSError:
                pass
            try:
                _, status = _os.waitpid(self.pid, 0)
                if _os.WIFSIGNALED(status):
                    self.signal = _os.WTERMSIG(status)
                    self.gone = why + ended_by(self.signal)
                elif _os.WIFEXITED(status) and eof:
                    self.gone = why + " (exit code " + str(_os.WEXITSTATUS(status)) + ")"
            except OSError:
                pass
        raise CandidateGone(self.gone)

    def request(self, obj: dict[str, Any]) -> dict[str, Any]:
        if self.gone is not None:
            raise CandidateGone(self.gone)
        try:
            send(self.call_w, obj)
        except OSError:
            self.ended("the candidate's process ended", eof=True)
        try:
            raw = receive(self.reply_r)
        except Malformed as e:
            self.malformed += 1
            self.ended("malformed reply: " + str(e))
        if raw is None:
            self.ended("the candidate's process ended", eof=True)
        try:
            return parse_message(raw)
        except Malformed as e:
            self.malformed += 1
            self.ended("malformed reply: " + str(e))

    def load(self, entry_point: str) -> dict[str, Any]:
        reply = self.request({"entry_point": entry_point})
        status = reply.get("load")
        if status not in ("ok", "syntax", "error", "missing") or set(reply) - {"load", "error", "traceback"}:
            self.malformed += 1
            self.ended("malformed reply to loading the solution")
        out = {"load": status}
        for key in ("error", "traceback"):
            if key in reply:
                out[key] = str(reply[key])[:2000]
        return out

    def call(self, args: Any, kwargs: Any) -> Any:
        """The candidate's return value, decoded; raises what it raised (as data: a builtin
        exception type of that name, else CandidateError), or CandidateGone."""
        reply = self.request({"args": args, "kwargs": kwargs})
        if len(reply) == 1 and "value" in reply:
            try:
                return decode_value(reply["value"])
            except (ValueError, TypeError, RecursionError) as e:
                self.malformed += 1
                self.ended("malformed value: " + describe(e))
        if len(reply) == 1 and type(reply.get("error")) is str:
            raise exception_from(reply["error"])
        self.malformed += 1
        self.ended("malformed reply to a call")


def exception_from(text: str) -> Exception:
    """The candidate's exception, for the check to see: its builtin type when it has one, except
    the ones that steer control flow (a StopIteration raised inside ``map(candidate, ...)`` would
    end the check's loop early, as if its remaining asserts were not there)."""
    name, _, message = text.partition(": ")
    kind = getattr(_builtins, name, None)
    steering = (StopIteration, StopAsyncIteration)
    if type(kind) is type and issubclass(kind, Exception) and not issubclass(kind, steering):
        try:
            return kind(message)
        except BaseException:
            pass
    return CandidateError(text)


def read_job(fd: int = 0) -> tuple[str, dict[str, Any]]:
    """The nonce and the job, from the private stdin (``fd``: the run's fd 0, or the memfd a judge
    is given; closed after): the nonce's line, then the job's JSON (``dojo.rewards.harness.job_stdin``).
    Read from the descriptor, not through ``sys.stdin``: its text layer cost every run ~60 page faults."""
    chunks = []
    try:
        while True:
            chunk = _os.read(fd, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        _os.close(fd)
    nonce, _, job = b"".join(chunks).partition(b"\n")
    return nonce.strip().decode(), _json.loads(job)


def grade(job_fd: int, report_fd: int, candidate: Candidate) -> None:
    """One job, read from ``job_fd``, run against ``candidate``; its reports, each a line carrying the
    nonce, written to ``report_fd``."""
    nonce, job = read_job(job_fd)

    def emit(obj: dict[str, Any]) -> None:
        write_all(report_fd, (nonce + " " + _json.dumps(obj) + "\n").encode())

    try:
        run_job(job, candidate, emit)
    except CandidateGone:
        pass
    if candidate.gone is not None:
        emit({"gone": candidate.gone, "signal": candidate.signal, "malformed": candidate.malformed})


def dojo_main(pid: int, call_w: int, reply_r: int) -> None:
    # Only now does anything secret enter this process.
    report_fd = _os.dup(1)
    _os.dup2(2, 1)  # whatever the check code prints goes to stderr, not to the report channel
    candidate = Candidate(pid, call_w, reply_r)
    grade(0, report_fd, candidate)
    if candidate.gone is None:  # end it, without waiting for its exit: the zygote reaps it (and
        try:  # counts its CPU time in the run's) while this process exits, on the other core
            _os.kill(pid, 9)
        except OSError:
            pass


def judge_main(sock: int) -> NoReturn:
    """The slot's judge (``dojo.sandbox.guest.judge``: forked from the zygote before it held any job,
    its own uid, not dumpable, every signal blocked): the trusted process of every judged run, one
    job at a time from the zygote on ``sock`` (the protocol: ``dojo.sandbox.guest.wire``). Between
    jobs it holds no descriptor of any run; the check code's prints go to the run's stderr."""
    use_trusted_path()  # before any import here
    import array
    import socket
    import time

    channel = socket.socket(fileno=sock)
    null = _os.open("/dev/null", _os.O_RDWR)
    recursion_limit = _sys.getrecursionlimit()
    channel.send(JUDGE_READY)
    while True:
        try:
            data, ancillary, _, _ = channel.recvmsg(JUDGE_JOB.size + 1, socket.CMSG_LEN(JUDGE_JOB_FDS * 4))
        except InterruptedError:
            continue
        except OSError:
            _os._exit(0)
        if not data:
            _os._exit(0)  # the zygote is gone
        fds = array.array("i")
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
        if len(data) != JUDGE_JOB.size or len(fds) != JUDGE_JOB_FDS:
            _os._exit(70)  # not the zygote's message: nothing here can be trusted to go on
        job_fd, call_w, reply_r, report_fd, err_fd = fds
        before = time.process_time()
        pid, number = JUDGE_JOB.unpack(data)
        candidate = Candidate(pid, call_w, reply_r)
        outcome = FAILED
        try:
            _os.dup2(err_fd, 1)
            _os.dup2(err_fd, 2)
            grade(job_fd, report_fd, candidate)
            outcome = ANSWERED if candidate.gone is None else GONE
        except BaseException as e:
            try:
                write_all(err_fd, ("dojo judge: " + describe(e) + "\n").encode())
            except BaseException:
                pass
        finally:
            flush_streams()
            _os.dup2(null, 1)
            _os.dup2(null, 2)
            for fd in fds:
                try:
                    _os.close(fd)
                except OSError:
                    pass
            _sys.setrecursionlimit(recursion_limit)
        channel.send(JUDGE_OUTCOME.pack(number, outcome, time.process_time() - before))


def check_codes(job: dict[str, Any]) -> list[Any] | None:
    """The task's code and its checks as the host compiled them (``compiled_checks``), where this
    interpreter is of the host's version; None (compile the text) otherwise."""
    compiled = job.get("compiled")
    if type(compiled) is not dict or compiled.get("tag") != _sys.implementation.cache_tag:
        return None
    try:
        codes = _marshal.loads(_binascii.a2b_base64(compiled["code"]))
    except (KeyError, TypeError, ValueError, EOFError):
        return None
    return codes if type(codes) is list and len(codes) == 1 + len(job["tests"]) else None


def run_job(job: dict[str, Any], candidate: Candidate, emit: Callable[[dict[str, Any]], None]) -> None:
    loaded = candidate.load(job["entry_point"])
    emit(loaded)
    if loaded["load"] != "ok":
        return
    if job["form"] == "function":
        for index, args, kwargs in job["calls"]:
            try:
                value = candidate.call(args, kwargs)
                emit({"case": index, "value": encode_value(value)})
            except CandidateGone:
                raise
            except BaseException as e:
                emit({"case": index, "error": describe(e)})
        return
    tol = job.get("tolerance", 1e-6)
    tally = [0, 0]

    def _dojo_tally(ok: object) -> None:
        tally[0 if ok is True else 1] += 1

    def _dojo_eq(a: Any, b: Any) -> bool:
        encode_value(a)
        encode_value(b)
        return values_equal(a, b, tol, roles=False)  # (either side may be the expected one)

    def _dojo_truth(x: object) -> bool:
        return type(x) is bool and x

    def _dojo_falsity(x: object) -> bool:
        return type(x) is bool and not x

    def proxy(*args: Any, **kwargs: Any) -> Any:
        return candidate.call(encode_value(list(args)), encode_value(kwargs))

    base: dict[str, Any] = {"__name__": "dojo_check", "__builtins__": _builtins}
    codes = check_codes(job)
    try:
        exec(codes[0] if codes else compile(job.get("context") or "", "<task>", "exec", dont_inherit=True), base)
    except BaseException as e:
        emit({"task_error": "the task's own code failed: " + describe(e)})
        return
    base.update({"_dojo_tally": _dojo_tally, "_dojo_eq": _dojo_eq, "_dojo_truth": _dojo_truth,
                 "_dojo_falsity": _dojo_falsity, job["entry_point"]: proxy})  # fmt: skip
    for index, test in enumerate(job["tests"]):
        tally[0] = tally[1] = 0
        tns = dict(base)
        try:
            exec(codes[1 + index] if codes else compile(test, "<check>", "exec", dont_inherit=True), tns)
            tns["check"](proxy)
            emit({"test": index, "passed": tally[0], "failed": tally[1], "completed": True})
        except BaseException as e:
            emit({"test": index, "passed": tally[0], "failed": tally[1], "completed": False,
                  "error": describe(e)})  # fmt: skip


def main(split: tuple[int, int, int] | None = None) -> None:
    """The trusted process. ``split``: (the candidate's pid, the call channel's write end, the reply
    channel's read end) where the zygote's forker has already forked the candidate's process
    (forker.c, ``split_harness``: this process was protected and both were reseeded there); else
    this process forks it, first thing."""
    # Before any import here, and before the candidate's code runs (its first message): a run's
    # given files are in /box from the start (``call_function(like=...)``).
    use_trusted_path()
    if split is not None:
        dojo_main(*split)
        return
    import ctypes
    import random

    # The zygote started this process non-dumpable, with every blockable signal blocked
    # (AsyncSandbox.run(harness=True)). After an execve (strict isolation: a fresh interpreter)
    # the kernel has made it dumpable again: undo that, and refuse to go on if it cannot be undone.
    libc = ctypes.pythonapi  # the process's own symbols: libc's prctl and fork
    if not make_undumpable(libc):
        _os.write(1, b"dojo harness: the trusted process is dumpable\n")
        _os._exit(70)
    call_r, call_w = _os.pipe()
    reply_r, reply_w = _os.pipe()
    # glibc's fork without CPython's after-fork hooks (this process has one thread): ~0.2 ms less
    pid = libc.fork()
    if pid < 0:
        _os.write(1, b"dojo harness: fork failed\n")
        _os._exit(70)
    if pid == 0:
        candidate_process(call_r, reply_w)
    _os.close(call_r)
    _os.close(reply_w)
    random.seed()  # the candidate's process has a copy of the state it had until now
    dojo_main(pid, call_w, reply_r)


if __name__ == "__main__":  # a preloaded harness (the zygote's fast path) is called as main()
    main()
