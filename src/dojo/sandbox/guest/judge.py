"""``Judge``: the zygote's end of the slot's judge, the trusted side of every judged grading run.

A grading run is two processes (``dojo.rewards.harness``): the candidate's, which runs the
model's code, and a trusted one, which holds the job (the checks, the nonce) and decides what the
candidate's answers are worth. Made for every grade, the trusted process cost most of what a grade
cost beyond a plain run: its fork, its set-up, and a copy-on-write fault for every page of the
zygote its Python touched (~580 faults a grade, ``bench/grade_cost.py``). The judge is that trusted
process made once per slot: forked from the zygote before it ever holds a job, it serves one job
per grading run, each on descriptors the zygote passes it (``send``), and its pages are its own
after its first jobs.

Where the forker makes runs (``guest.forker``), a harness run whose preloaded program defines
``judge_main`` (``dojo.rewards.programs.harness``) is *judged*: the forker makes only the
candidate's process (forker.c's ``become_candidate``), and the judge gets the job (the private stdin,
a memfd whose bytes never entered the zygote), its ends of the channel, the report pipe (the run's
stdout) and the run's stderr. What keeps the candidate's process away from the judge:

- its own uid (the slot's run uid + ``JUDGE_UID_OFFSET``; rootless: a nested user namespace of its
  own, which the candidate's process has no capability in): no signal from the candidate reaches
  it (rootless: the two are one user outside, so SIGKILL and SIGSTOP do, as they reached the
  per-grade trusted process; a stopped judge is continued before each job, a dead one replaced, and
  the grade it was on fails, as a run whose trusted process was killed fails);
- not dumpable, every blockable signal blocked: its memory, descriptors and earlier jobs cannot be
  read through /proc or ptrace;
- it was forked before any job existed, and the zygote never holds one (``Zygote.read_request``),
  so no run's process, forked from the forker, has a copy of any job.

The zygote ends a judged run when the judge has sent its outcome (``read_outcome``): it then kills
the candidate's process and whatever it left. A judge that overruns the run's wall-clock limit
(check code that never ends) is killed with the run and replaced at the next grade.

Runs inside the sandbox, in the zygote (and, forked, in the judge): standard library only.
"""

from __future__ import annotations

import array
import os
import resource
import select
import signal
import socket
from typing import TYPE_CHECKING, Any

from dojo.sandbox.guest.forker import Resident
from dojo.sandbox.guest.syscalls import PR_SET_DUMPABLE
from dojo.sandbox.guest.wire import JUDGE_JOB, JUDGE_JOB_FDS, JUDGE_OUTCOME, JUDGE_READY

if TYPE_CHECKING:
    from dojo.sandbox.guest.child import RunChild

JUDGE_UID_OFFSET = 1 << 30  # the judge's uid: the slot's run uid plus this (pool uids stay far below)
# Every resource limit a process of the judge's user could lower from outside (``Judge.tampered``).
RLIMITS = tuple(getattr(resource, n) for n in sorted(dir(resource)) if n.startswith("RLIMIT_"))
READY_TIMEOUT_S = 10.0  # a judge starts in milliseconds; past this it is killed and the run not judged


class Judge(Resident):
    """The zygote's end of the slot's judge (see the module's doc)."""

    def __init__(self) -> None:
        self.pid: int | None = None
        self.sock: socket.socket | None = None
        # each job's number, which its outcome carries: an outcome of an earlier job (its request
        # failed while the judge was on it, and no one read it) is never taken for this one's
        self.job = 0
        self.state: tuple[Any, ...] = ()  # what a process of the same user could change (``tampered``)
        self.snapshot: tuple[str | None, int] = (None, 0)  # (the harness's code cache key, IPC generation)

    def ready(self, key: str, ipc_generation: int) -> bool:
        """Whether a judge of this harness (``key``) runs, continued (rootless: a run of the same user
        may have stopped it); a dead one is reaped and forgotten."""
        if self.snapshot != (key, ipc_generation) or not self.alive():
            return False
        assert self.pid is not None
        try:
            os.kill(self.pid, signal.SIGCONT)
        except ProcessLookupError:
            self.stop()
            return False
        return True

    def spawn(self, zygote: RunChild, harness: dict[str, Any], key: str) -> None:
        """Fork the judge from the zygote as it is now (it holds no job: see the module's doc) and
        start it on ``harness``'s ``judge_main``, replacing any earlier one."""
        self.stop()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        theirs_fd = theirs.detach()
        pid = zygote.sys.fork()
        if pid == 0:  # pragma: no cover - the judge
            try:
                ours.detach()
                os.closerange(3, theirs_fd)
                os.closerange(theirs_fd + 1, 1 << 16)
                os.setsid()
                if zygote.rootless:
                    zygote.become_run_user()  # a nested user namespace of its own, no capability
                else:
                    uid = zygote.uid + JUDGE_UID_OFFSET
                    os.setgroups([])
                    os.setresgid(uid, uid, uid)
                    os.setresuid(uid, uid, uid)
                zygote.sys.prctl(PR_SET_DUMPABLE, 0)
                signal.pthread_sigmask(signal.SIG_BLOCK, zygote.blockable_signals)
                os.chdir("/")
                harness["judge_main"](theirs_fd)
            finally:
                os._exit(127)
        os.close(theirs_fd)
        self.pid, self.sock = pid, ours
        self.snapshot = (key, zygote.jail.ipc_generation)
        poller = select.poll()
        poller.register(ours.fileno(), select.POLLIN)
        try:
            ready = bool(poller.poll(READY_TIMEOUT_S * 1000)) and ours.recv(8) == JUDGE_READY
        except OSError:
            ready = False
        if not ready:
            self.stop()
            raise OSError("the judge did not start")
        # rootless: what a run of the same user could change in it (root mode: no run can; the
        # zygote, without CAP_SYS_RESOURCE, may not even read another uid's rlimits)
        self.state = self.settings() if zygote.rootless else ()

    def settings(self) -> tuple[Any, ...]:
        """What a process of the judge's user may change in it from outside, and what lasts: its
        rlimits, nice value, OOM score and CPU affinity."""
        assert self.pid is not None
        with open(f"/proc/{self.pid}/oom_score_adj", "rb") as f:
            oom = f.read()
        limits = tuple(resource.prlimit(self.pid, r) for r in RLIMITS)
        return limits, os.getpriority(os.PRIO_PROCESS, self.pid), oom, frozenset(os.sched_getaffinity(self.pid))

    def tampered(self) -> bool:
        """Whether the judge is not as it was set up. Rootless, each run is the judge's user outside
        their namespaces, and the kernel lets a process of the same user set another's rlimits (an
        RLIMIT_NOFILE of 3 made the judge fail the next grade, another task's), nice value, OOM score
        and CPU affinity: a judge changed so is replaced before its next job (root mode: another
        uid, so no run can)."""
        try:
            return self.settings() != self.state
        except OSError:
            return True

    def send(self, candidate: int, fds: tuple[int, ...]) -> None:
        """One job for the judge: the candidate's pid, and ``fds`` (see ``wire.JUDGE_JOB_FDS``).
        OSError if the judge is gone."""
        assert self.sock is not None and len(fds) == JUDGE_JOB_FDS
        self.job = (self.job + 1) & 0xFFFFFFFF
        self.sock.sendmsg([JUDGE_JOB.pack(candidate, self.job)],
                          [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])  # fmt: skip

    def read_outcome(self) -> tuple[int, float] | bool | None:
        """The judge's outcome of this job and the CPU seconds it took; None if the judge died (it
        is reaped and forgotten then); False for an earlier job's outcome (read again)."""
        assert self.sock is not None
        try:
            data = self.sock.recv(JUDGE_OUTCOME.size)
        except OSError:
            data = b""
        if len(data) != JUDGE_OUTCOME.size:
            self.stop()
            return None
        job, outcome, cpu = JUDGE_OUTCOME.unpack(data)
        return (int(outcome), float(cpu)) if job == self.job else False
