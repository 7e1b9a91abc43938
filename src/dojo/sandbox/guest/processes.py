"""How the zygote makes a one-shot run's process and ends it: from the forker (``guest.forker``)
or by its own fork (``fork_or_start``), or from the spare forked while the slot was idle
(``Spare``, ``fork_spare``); and how it kills and reaps every process a request left
(``kill_all``, ``reap_all``).

Runs inside the sandbox, in the zygote: standard library only.
"""

from __future__ import annotations

import _thread
import marshal
import os
import struct
import time
from typing import TYPE_CHECKING, Any

from dojo.sandbox.guest.child import RunChild
from dojo.sandbox.guest.judge import Judge
from dojo.sandbox.guest.wire import RunStep, read_exact, write_all

if TYPE_CHECKING:
    from dojo.sandbox.guest.sessions import Sessions


class Spare:
    """The next run's process, forked while the slot is idle (``RunProcesses.fork_spare``) so that a
    request does not wait for the fork: it blocks on ``ctl`` until the zygote sends it its step
    (``RunProcesses.start_spare``), then sets itself up exactly as a freshly forked run's child does.
    Forked after the last request and its reply were zeroed, it never held any run's data. These are the
    zygote's ends; the spare holds the others."""

    def __init__(self, pid: int, ctl: int, stdin_w: int, out: int, err: int, exc: int, memfd: int,
                 cache_keys: frozenset[str]) -> None:  # fmt: skip
        self.pid = pid
        self.ctl = ctl  # the step, as one length-prefixed marshal message
        self.stdin_w = stdin_w  # the run's stdin pipe (unused when the stdin is private)
        self.out, self.err, self.exc = out, err, exc
        self.memfd = memfd  # a private stdin is spliced here (``Zygote.splice_to_memfd``)
        self.cache_keys = cache_keys  # the compiled main files the spare inherited

    def close(self) -> None:
        for fd in (self.ctl, self.stdin_w, self.out, self.err, self.exc, self.memfd):
            try:
                os.close(fd)
            except OSError:
                pass


class RunProcesses(RunChild):
    """The zygote's part that makes and ends runs' processes (the ``Zygote`` sets every field)."""

    spare: Spare | None  # the next run's process, forked while idle (``fork_spare``)
    spares: bool  # whether to fork one (off for a session's slot)
    previous_env: dict[str, str] | None  # the last run's environment (``fork_or_start``)
    marks: list[tuple[str, float]]  # the request's timings (``Zygote.handle_request``)
    sessions: Sessions
    judge: Judge  # the slot's judge (``guest.judge``): the trusted side of judged grading runs

    # -- a run's process: from the forker, or forked here ----------------------------------------

    def fork_or_start(self, step: RunStep, req: dict[str, Any], fds: tuple[int, int, int],
                      candidate: bool = False) -> tuple[int, int]:  # fmt: skip
        """A run's process, with ``fds`` as its stdin, stdout and stderr (closed here once the run has
        them): from the forker where there is one, else forked here and set up by ``RunChild.child``. Its pid,
        and the read end of its set-up error pipe (the run writes its pid there first, then any
        set-up or exec error). ``candidate``: a judged harness's candidate process (``guest.judge``),
        which only the forker makes."""
        forker = self.forker
        env = req.get("env") or {}
        try:
            if forker is not None and step.get("role") != "session":
                keys, generation = forker.snapshot
                stale = (self.cached_key is not None and self.cached_key not in keys) or (
                    generation != self.jail.ipc_generation
                )
                # A run whose environment is not the forker's sets its own (~80 page faults); the same
                # environment twice running becomes the forker's (so alternating ones never thrash).
                if env != forker.environment and env == self.previous_env:
                    self.use_environment(env)
                    stale = True
                self.previous_env = env
                if stale or not forker.alive():
                    forker.spawn(self)
                source = self.main_source if not step.get("argv") else None
                # (argv, env) for a program, else (file, args, code cache key, env or None, source length
                # or None, the modules its files provide or None): a tuple, whose loading in the run
                # costs fewer page faults than a dict's
                source_len = len(source) if source is not None else None
                run = (step["argv"], env) if step.get("argv") else (
                    step["inline_python"], list(step.get("args") or []), self.cached_key,
                    env if env != forker.environment else None, source_len, step.get("modules"))  # fmt: skip
                message = marshal.dumps(run)
                if len(message) + (source_len or 0) <= forker.PAYLOAD_CAPACITY:
                    setup = forker.setup(self, step, req, candidate)
                    parts = (setup, message) if source is None else (setup, message, source)
                    # The stdio fds stay ours until the run has them, so that the run can be sent
                    # again; each try has an error pipe of its own, whose EOF with nothing written
                    # says no run was cloned (a run writes its pid first): then, and only then, the
                    # forker died before it read the message (rootless: a run killed it) and a
                    # resend cannot start the run twice.
                    for _ in range(2):
                        exc_r, exc_w = os.pipe2(os.O_CLOEXEC)
                        try:
                            try:
                                forker.send(parts, (*fds, exc_w))
                            except (BrokenPipeError, ConnectionError):  # it died since (rootless: a run killed it)
                                forker.spawn(self)
                                forker.send(parts, (*fds, exc_w))
                        finally:
                            os.close(exc_w)
                        try:
                            pid = forker.wait_pid(exc_r)
                        except BaseException:
                            os.close(exc_r)
                            raise
                        if pid is not None:
                            return pid, exc_r
                        os.close(exc_r)
                        forker.spawn(self)
                    raise OSError("the forker did not fork the run (twice)")
            if candidate:
                raise OSError("a judged run's candidate process is made by the forker only")
            self.use_environment(env)
            exc_r, exc_w = os.pipe2(os.O_CLOEXEC)
            pid = self.fork_run()
            if pid == 0:  # pragma: no cover - the child never returns
                self.become_run(step, req, *fds, exc_w)
            os.close(exc_w)
            return pid, exc_r
        finally:
            for fd in fds:
                os.close(fd)

    # -- the spare: the next run's process, forked while idle ----------------------------------

    def fork_spare(self, protocol_fds: tuple[int, ...]) -> None:
        """Fork the next run's process now, while nothing waits for it (a fork of a zygote that
        has imported pandas costs milliseconds). Skipped where it could not be used: a session's
        slot, or when a spare is already there. A fork that fails leaves no spare."""
        if not self.spares or self.spare is not None or self.sessions.worker is not None:
            return
        # ctl, stdin, stdout, stderr, set-up errors (the run's three made openable by name when the spare
        # is taken for a run that is not protected: ``capture.open_to_run``)
        pipes = [os.pipe2(os.O_CLOEXEC) for _ in range(5)]
        memfd = os.memfd_create("stdin", os.MFD_CLOEXEC)
        (ctl_r, ctl_w), (in_r, in_w), (out_r, out_w), (err_r, err_w), (exc_r, exc_w) = pipes
        try:
            pid = self.fork_run()
        except OSError:
            for fd in (memfd, *(fd for pair in pipes for fd in pair)):
                os.close(fd)
            return
        if pid == 0:  # pragma: no cover - the spare never returns
            try:
                for fd in (ctl_w, in_w, out_r, err_r, exc_r, *protocol_fds):
                    os.close(fd)
                (n,) = struct.unpack("<I", read_exact(ctl_r, 4))
                message = marshal.loads(read_exact(ctl_r, n))
                os.close(ctl_r)
            except BaseException:  # EOF: the zygote discarded this spare
                os._exit(0)
            step, req = message["step"], message["req"]
            key = message["key"]
            self.cached_code = self.code_cache[key] if key is not None else None
            self.use_environment(req.get("env") or {})
            if message["private"]:
                os.close(in_r)
                in_r = memfd
            else:
                os.close(memfd)
            self.become_run(step, req, in_r, out_w, err_w, exc_w)
        for fd in (ctl_r, in_r, out_w, err_w, exc_w):
            os.close(fd)
        self.spare = Spare(pid, ctl_w, in_w, out_r, err_r, exc_r, memfd, frozenset(self.code_cache))

    def take_spare(self) -> Spare | None:
        """The spare for this step, or None (a fresh fork then): it must have inherited the step's
        compiled main file. A spare that cannot serve is discarded."""
        spare, self.spare = self.spare, None
        if spare is not None and self.cached_key is not None and self.cached_key not in spare.cache_keys:
            self.discard(spare)
            return None
        return spare

    def start_spare(self, spare: Spare, step: RunStep, req: dict[str, Any], private: bool) -> bool:
        """Send the spare its step; False (the spare discarded) if it is gone."""
        try:
            message = marshal.dumps({"step": dict(step), "key": self.cached_key, "private": private,
                                     "req": {"env": req.get("env") or {}, "network": req.get("network")}})  # fmt: skip
        except ValueError:  # not marshallable: cannot happen for a step built by the host
            self.discard(spare)
            return False
        sent = time.perf_counter()
        try:
            write_all(spare.ctl, struct.pack("<I", len(message)) + message)
        except OSError:  # EPIPE: it died (it is killed with everything else on an error)
            self.discard(spare)
            return False
        self.marks.append(("spare", sent))  # (only a spare that took its step: else the run is forked)
        return True

    def discard_spare(self) -> None:
        spare, self.spare = self.spare, None
        if spare is not None:
            self.discard(spare)

    @staticmethod
    def discard(spare: Spare) -> None:
        spare.close()
        try:
            os.kill(spare.pid, 9)
            os.waitpid(spare.pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass

    def fork_run(self) -> int:
        """``os.fork()`` for a run's process, without CPython's after-fork hooks (see ``Syscalls``).
        The child reseeds ``random`` itself (``run_python_inline``)."""
        if _thread._count():  # never the case; another thread would make the hooks necessary
            return os.fork()
        return self.sys.fork()

    # -- ending runs: every other process of the namespace killed and reaped ---------------------

    def kill_all(self) -> list[int]:
        """SIGKILL every other process of the namespace but the forker and the judge. The pids
        signalled, found in /proc, where there is a forker to spare; else ``kill(-1)`` (every process
        but PID 1, the judge too) and []."""
        if self.forker is None or self.forker.pid is None:
            try:
                os.kill(-1, 9)  # as PID 1 of the namespace: every process but ourselves
            except ProcessLookupError:
                pass
            self.judge.forget()  # (killed: ``Judge.ready`` would not find it again)
            return []
        spared = (1, self.forker.pid, self.judge.pid)
        if self.cgroup.tasks() == len(spared) - (self.judge.pid is None):  # no one else: no need to look
            return []
        others = [pid for pid in map(int, filter(str.isdigit, os.listdir("/proc"))) if pid not in spared]
        for pid in others:
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
        return others

    def reap_all(self) -> float:
        """Kill and reap every other process of the namespace (a spare included, the forker and the
        judge not),
        until none is left; then make sure no IPC object of theirs outlives them. The CPU seconds
        of the processes it reaped (what a run's leftovers used: the run's own, too)."""
        if self.spare is not None:
            self.spare.close()
            self.spare = None
        cpu = 0.0
        if self.forker is not None and self.forker.alive():
            cpu = self.reap_all_but_the_forker()
        else:
            while True:
                self.kill_all()
                try:
                    pid, _, ru = os.wait4(-1, os.WNOHANG)
                except ChildProcessError:
                    break
                if pid == 0:
                    try:
                        _, _, ru = os.wait4(-1, 0)
                    except ChildProcessError:
                        break
                cpu += ru.ru_utime + ru.ru_stime
        self.jail.drop_ipc_if_used()
        return cpu

    def reap_all_but_the_forker(self) -> float:
        """Kill and reap every process of the namespace but the forker (a child of ours that
        ``waitpid(-1)`` would wait for forever), and say how many CPU seconds they used. A process
        whose parent still lives is not ours to reap: it is ours once that parent dies, on a later
        pass."""
        cpu = 0.0
        while others := self.kill_all():
            reaped = False
            for pid in others:
                try:
                    _, _, ru = os.wait4(pid, 0)
                    cpu += ru.ru_utime + ru.ru_stime
                    reaped = True
                except ChildProcessError:
                    pass
            if not reaped:
                time.sleep(0.0005)
        return cpu
