"""The one-shot run path: ``OneShotRun.run_step`` runs one step of a request in a process of its
own (``guest.processes``) and meters it: its stdin fed, stdout and stderr captured up to the cap
(``guest.capture``), the wall-clock limit enforced, the process and what it left killed and reaped,
then the raw facts (exit status, signal, times, peak memory, OOM kills, the limit hit) reported.

Runs inside the sandbox, in the zygote: standard library only.
"""

from __future__ import annotations

import os
import select
import sys
import time
from typing import Any

from dojo.sandbox.guest.capture import Capture, classify_limit, open_to_run, stdio_pipe
from dojo.sandbox.guest.processes import RunProcesses
from dojo.sandbox.guest.wire import ANSWERED, FAILED, Blob, RunLimits, RunReply, RunStep

# Once a judged run's candidate is killed at its deadline, how long its judge has to report the
# cases left (each fails at once: the channel is closed) before it is killed too, and replaced.
JUDGE_GRACE_S = 1.0


class OneShotRun(RunProcesses):
    """The zygote's one-shot run path (the ``Zygote`` sets every field)."""

    oom_count: int  # the group's OOM kills so far
    private_stdin: int | None  # the request's private stdin, a memfd (``Zygote.read_request``)

    def judged(self, step: RunStep, private: bool) -> bool:
        """Whether the step is a judged grading run (``guest.judge``): a protected run of a preloaded
        harness that defines ``judge_main``, its job on a private stdin, where the forker makes runs.
        The judge is started here where none of this harness runs; where it cannot be, the run is
        not judged (its own trusted process grades: ``Forker.splits``)."""
        cached, key = self.cached_code, self.cached_key
        if not (private and step.get("protect") and self.forker is not None and key is not None
                and isinstance(cached, dict) and callable(cached.get("judge_main"))):  # fmt: skip
            return False
        if self.judge.ready(key, self.jail.ipc_generation) and not (self.rootless and self.judge.tampered()):
            return True
        try:
            self.judge.spawn(self, cached, key)
        except OSError:
            return False
        return True

    def run_step(self, step: RunStep, stdin: bytes, req: dict[str, Any]) -> tuple[RunReply, Blob, Blob]:
        lim: RunLimits = step["limits"]
        oom_before = self.oom_count
        private = bool(step.get("stdin") and self.private_stdin is not None)
        judged = self.judged(step, private)
        residents = 1 + (self.forker is not None) + (self.judge.pid is not None)  # the zygote, forker, judge
        mem_base = self.cgroup.set_limits(lim, residents=residents)
        self.cgroup.reset_peak(mem_base)

        spare = None if judged else self.take_spare()
        start = time.monotonic()
        judge_fd = -1  # the judge's socket while it is on this run's job
        if judged:  # the candidate's process from the forker, the job to the judge
            assert self.private_stdin is not None and self.judge.sock is not None
            job, self.private_stdin, stdin, in_w = self.private_stdin, None, b"", -1
            (call_r, call_w), (reply_r, reply_w) = os.pipe2(os.O_CLOEXEC), os.pipe2(os.O_CLOEXEC)
            (out_r, out_w), (err_r, err_w) = os.pipe2(os.O_CLOEXEC), os.pipe2(os.O_CLOEXEC)
            judge_fds = (job, call_w, reply_r, out_w, err_w)
            try:
                self.marks.append(("fork", time.perf_counter()))
                start = time.monotonic()
                pid, exc_r = self.fork_or_start(step, req, (call_r, reply_w, os.dup(err_w)), candidate=True)
                self.judge.send(pid, judge_fds)
            except BaseException:
                os.close(out_r)
                os.close(err_r)
                raise
            finally:
                for fd in judge_fds:
                    os.close(fd)
            judge_fd = self.judge.sock.fileno()
        elif spare is not None and self.start_spare(spare, step, req, private):
            pid, in_w, out_r, err_r, exc_r = spare.pid, spare.stdin_w, spare.out, spare.err, spare.exc
            if not step.get("protect"):
                open_to_run(out_r, err_r, *(() if private else (in_w,)))
            os.close(spare.ctl)
            os.close(spare.memfd)
            if private:
                assert self.private_stdin is not None
                os.close(self.private_stdin)  # the spare reads its own copy of the memfd
                self.private_stdin, stdin = None, b""
                os.close(in_w)
                in_w = -1
        else:
            if private:  # the run reads a memfd this process never read (read_request)
                assert self.private_stdin is not None
                in_r, in_w, stdin = self.private_stdin, -1, b""
                self.private_stdin = None
            else:
                in_r, in_w = stdio_pipe(openable=not step.get("protect"))
            out_r, out_w = stdio_pipe(openable=not step.get("protect"))
            err_r, err_w = stdio_pipe(openable=not step.get("protect"))
            sys.stdout.flush()
            sys.stderr.flush()
            self.marks.append(("fork", time.perf_counter()))
            start = time.monotonic()
            pid, exc_r = self.fork_or_start(step, req, (in_r, out_w, err_w))
        pidfd = os.pidfd_open(pid)
        capture = Capture(lim["output_bytes"])
        limit: str | None = None
        deadline = start + lim["wall_s"]
        poller = select.poll()
        fds = {out_r: "stdout", err_r: "stderr"}
        for fd in fds:
            os.set_blocking(fd, False)
            poller.register(fd, select.POLLIN)
        poller.register(pidfd, select.POLLIN)
        if judge_fd >= 0:
            poller.register(judge_fd, select.POLLIN)
        outcome: tuple[int, float] | None = None  # the judge's, once it has sent it
        judge_grace = True  # past the deadline, the judge gets JUDGE_GRACE_S to end its job
        pending = memoryview(stdin)
        if pending:
            os.set_blocking(in_w, False)
            poller.register(in_w, select.POLLOUT)
        elif in_w >= 0:
            os.close(in_w)
            in_w = -1
        exited = False
        open_fds = set(fds)
        killed_all = False
        while open_fds or not exited or judge_fd >= 0:
            timeout = deadline - time.monotonic()
            if timeout <= 0:
                if limit is None and (not exited or judge_fd >= 0):
                    limit = "wall"
                self.kill_all()
                killed_all = True
                if judge_fd >= 0 and judge_grace:  # the candidate is gone: its judge reports the rest now
                    judge_grace, deadline = False, time.monotonic() + JUDGE_GRACE_S
                    continue
                if judge_fd >= 0:  # still on the job (check code that never ends): replaced next time
                    poller.unregister(judge_fd)
                    self.judge.stop()
                    judge_fd = -1
                deadline = time.monotonic() + 5.0
                if exited:
                    break
                timeout = 5.0
            for fd, _event in poller.poll(timeout * 1000):
                if fd == judge_fd:  # the job is done (or the judge died): end the candidate's process
                    got = self.judge.read_outcome()
                    if got is False:  # an earlier job's
                        continue
                    poller.unregister(judge_fd)
                    judge_fd = -1
                    outcome = got if isinstance(got, tuple) else None
                    if not killed_all:
                        self.kill_all()
                        killed_all = True
                elif fd == pidfd:
                    exited = True
                    self.marks.append(("exited", time.perf_counter()))
                    poller.unregister(pidfd)
                    # Drain what is buffered now, then kill leftovers (background children
                    # holding the pipes open) so the reads below reach EOF promptly.
                    for rfd in list(open_fds):
                        if not capture.drain(rfd, fds[rfd]):
                            open_fds.discard(rfd)
                            poller.unregister(rfd)
                    if open_fds and not killed_all and judge_fd < 0:  # (a judge still writes: wait)
                        self.kill_all()
                        killed_all = True
                elif fd == in_w:
                    try:
                        n = os.write(in_w, pending[: 1 << 16])
                        pending = pending[n:]
                    except (BlockingIOError, InterruptedError):
                        continue
                    except OSError:  # EPIPE: the program stopped reading
                        pending = pending[:0]
                    if not pending:
                        poller.unregister(in_w)
                        os.close(in_w)
                        in_w = -1
                elif fd in open_fds:
                    if not capture.drain(fd, fds[fd]):
                        open_fds.discard(fd)
                        poller.unregister(fd)
                    if capture.over_cap and limit is None:
                        limit = "output"
                        self.kill_all()
                        killed_all = True
        for fd in (*open_fds, out_r, err_r):
            try:
                os.close(fd)
            except OSError:
                pass
        if in_w >= 0:
            os.close(in_w)
        self.marks.append(("eof", time.perf_counter()))
        _, status, ru = os.wait4(pid, 0)
        wall = time.monotonic() - start
        os.close(pidfd)
        leftovers_cpu = self.reap_all()  # (a grading harness's candidate process among them)
        self.marks.append(("reaped", time.perf_counter()))
        exec_error = os.read(exc_r, 4096).decode(errors="replace") or None
        os.close(exc_r)
        cpu = ru.ru_utime + ru.ru_stime + leftovers_cpu
        exit_code = os.waitstatus_to_exitcode(status)
        if judged:  # the run's status is the judge's: an exit code the candidate chose says nothing
            cpu += outcome[1] if outcome is not None else 0.0
            if outcome is None:
                exit_code = -9  # the judge was killed (by the wall-clock limit, or rootless: a run)
            elif outcome[0] == FAILED:
                exit_code = 1
            elif outcome[0] == ANSWERED or exit_code > 0:
                # every call answered (the candidate's process was killed here after), or it stopped
                # answering and exited: 0, as a per-run trusted process exits (the host read a chosen
                # 70 as "the harness could not start": an infrastructure error, not a 0); a signal
                # that ended it stays the run's (its CPU limit is the run's)
                exit_code = 0
        sig = -exit_code if exit_code < 0 else None
        self.oom_count = self.cgroup.oom_kills()
        oom = self.oom_count > oom_before
        limit = classify_limit(limit, lim, memory_cgroup=self.cgroup.has("memory"), sig=sig, cpu=cpu, oom=oom,
                               failed=exit_code != 0, err=capture.err, max_rss=ru.ru_maxrss * 1024)  # fmt: skip
        peak = self.cgroup.read_peak(mem_base) or ru.ru_maxrss * 1024
        res: RunReply = {
            "role": step.get("role", "run"),
            "exit_code": exit_code if exit_code >= 0 else None,
            "signal": sig,
            "wall_s": wall,
            "cpu_s": cpu,
            "peak_memory_bytes": peak,
            "limit": limit,
            "oom_killed": oom,
            "stdout_truncated": capture.truncated["stdout"],
            "stderr_truncated": capture.truncated["stderr"],
            "exec_error": exec_error,
        }
        return res, capture.out, capture.err  # (views of buffers the zygote zeroes after its reply)
