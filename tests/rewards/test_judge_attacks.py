"""Attacks on the slot's judge (``dojo.sandbox.guest.judge``): the one trusted process per slot that
grades every judged run. Each test is an attack by a candidate that has read the code; it passes when
the defence holds, as a user sees it: a wrong answer scores 0 (never None), a later grade on the same
slot is right, nothing secret is read. Every grade here lands on one slot (``pool_size=1``), so what
one candidate leaves behind is what the next grade meets.

Root mode is what CI runs; rootless mode (pytest as ``nobody``) runs the same file, where the judge and
the candidate are one user outside their namespaces.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from dojo.rewards import Grader, GradingConfig, Reward
from dojo.rewards.harness import assert_job, call_function, rewrite_asserts, run_harness
from dojo.sandbox import AsyncSandbox, Limits, Program, Verdict
from dojo.tasks import Task, TestCase
from tests.sandbox.conftest import SKIP_REASON

SECRET = "JUDGE-SECRET-9137"
LIMITS = Limits(wall_time=3.0, cpu_time=2.0)

# A task whose hidden check carries a secret, and whose right answer is f(x) = x + 1.
SECRET_TASK = Task(
    id="secret",
    form="assert",
    prompt="",
    entry_point="f",
    tests=[TestCase(code=f"def check(candidate):\n    # {SECRET}\n    assert candidate(41) == 42\n")],
)
PLUS_ONE = Task(id="plus", form="function", prompt="", entry_point="f",
                tests=[TestCase(args=[1], expected=2), TestCase(args=[41], expected=42)])  # fmt: skip
RIGHT = "def f(x):\n    return x + 1\n"
WRONG = "def f(x):\n    return x\n"

# The candidate's helpers: the judge is the other process of the slot started last (after the
# zygote and the forker); every other pid seen, too.
FIND = """import ctypes, os


def _others():
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, os.getpid())]


def _start(p):
    try:
        return int(open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[19])
    except OSError:
        return -1


def _blocked(p):
    try:
        return any(l.startswith("SigBlk:") and int(l.split()[1], 16) for l in open(f"/proc/{p}/status"))
    except OSError:
        return False


def _judge():
    others = [p for p in _others() if _start(p) >= 0]
    protected = [p for p in others if _blocked(p)]  # (the judge blocks every signal it can)
    return max(protected or others, key=_start) if others else None


_libc = ctypes.CDLL(None, use_errno=True)
"""


@pytest_asyncio.fixture(scope="module")
async def sb() -> AsyncIterator[AsyncSandbox]:
    if SKIP_REASON:
        pytest.skip(SKIP_REASON)
    async with AsyncSandbox(pool_size=1) as sandbox:
        yield sandbox


def grader(sb: AsyncSandbox) -> Grader:
    return Grader(sb, GradingConfig(scan=False, limits=LIMITS))


async def still_right(sb: AsyncSandbox) -> None:
    """The slot's next grades: a right answer scores 1, a wrong one 0."""
    g = grader(sb)
    right, wrong = await g.grade(PLUS_ONE, RIGHT), await g.grade(PLUS_ONE, WRONG)
    assert right.value == 1.0, (right.verdict, right.error, right.cases)
    assert wrong.value == 0.0, (wrong.verdict, wrong.error)


def scored_zero(r: Reward) -> None:
    assert r.value == 0.0, (r.value, r.verdict, r.error, r.cases)


# -- (b) reading the job: the judge's memory, descriptors, environment, of this grade or another ---

READ_JUDGE = (
    FIND
    + r"""
import re, sys


def _can(fn):
    try:
        return bool(fn())
    except Exception:
        return False


def _getfd(pid):
    pfd = _libc.syscall(434, pid, 0)  # pidfd_open
    if pfd < 0:
        return False
    got = [fd for fd in range(64) if _libc.syscall(438, pfd, fd, 0) >= 0]  # pidfd_getfd
    os.close(pfd)
    return got


def _scan_memfds():
    # every memfd or deleted file this process could reach through any /proc/*/fd
    found = []
    for p in _others():
        if True:
            try:
                for fd in os.listdir(f"/proc/{p}/fd"):
                    try:
                        r = os.open(f"/proc/{p}/fd/{fd}", os.O_RDONLY | os.O_NONBLOCK)
                        try:
                            data = os.pread(r, 1 << 20, 0)
                        except OSError:
                            data = os.read(r, 1 << 20)
                        os.close(r)
                        if re.search(rb"JUDGE[-]SECRET", data):
                            found.append((p, fd))
                    except OSError:
                        pass
            except OSError:
                pass
    return found


def f(x):
    j = _judge()
    local = (ctypes.c_char * 16)()
    iov_local = (ctypes.c_void_p * 2)(ctypes.addressof(local), 16)
    iov_remote = (ctypes.c_void_p * 2)(0x400000, 16)
    seen = {
        "mem": _can(lambda: open(f"/proc/{j}/mem", "rb").read(1)),
        "maps": _can(lambda: open(f"/proc/{j}/maps").read(1)),
        "environ": _can(lambda: open(f"/proc/{j}/environ", "rb").read(1)),
        "fd_targets": _can(lambda: [os.readlink(f"/proc/{j}/fd/{n}") for n in os.listdir(f"/proc/{j}/fd")]),
        "fdinfo": _can(lambda: open(f"/proc/{j}/fdinfo/0").read()),
        "ptrace_attach": _libc.ptrace(16, j, 0, 0) == 0,
        "ptrace_seize": _libc.ptrace(0x4206, j, 0, 0) == 0,
        "vm_readv": _libc.process_vm_readv(j, iov_local, 1, iov_remote, 1, 0) >= 0,
        "pidfd_getfd": _getfd(j),
        "stack": _can(lambda: open(f"/proc/{j}/stack").read(1)),
        "syscall": _can(lambda: open(f"/proc/{j}/syscall").read(1)),
        "memfds": _scan_memfds(),
        "in_my_memory": _mine(),
        "my_mem_readable": not _can(lambda: open("/proc/self/mem", "rb")),
    }
    leaked = {k: v for k, v in seen.items() if v}
    if leaked:
        raise RuntimeError(repr(leaked))
    return x + 1


def _mine():
    _libc.prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE: its own /proc/self/mem readable (root mode: setuid cleared it)
    hits = 0
    for line in open("/proc/self/maps"):
        a, b = (int(v, 16) for v in line.split()[0].split("-"))
        if "r" not in line.split()[1] or "[vvar]" in line or "[vsyscall]" in line:
            continue
        try:
            with open("/proc/self/mem", "rb") as m:
                m.seek(a)
                data = m.read(b - a)
        except (OSError, OverflowError, ValueError):
            continue
        hits += len(re.findall(rb"JUDGE[-]SECRET[-]9137", data))  # (a pattern that is not its own text)
    return hits
"""
)


async def test_the_candidate_reaches_nothing_of_the_judge_during_its_own_grade(sb: AsyncSandbox) -> None:
    """Memory, maps, environ, fd targets, fdinfo, ptrace, process_vm_readv, pidfd_getfd, /proc stack
    and syscall of the judge while it holds this grade's job; every memfd any /proc/*/fd reaches; its
    own memory. It passes only if it reached nothing (a right answer that raises otherwise)."""
    r = await grader(sb).grade(SECRET_TASK, READ_JUDGE)
    assert r.value == 1.0, (r.verdict, r.error, r.cases)


async def test_an_earlier_grades_secret_is_nowhere_a_later_candidate_looks(sb: AsyncSandbox) -> None:
    g = grader(sb)
    assert (await g.grade(SECRET_TASK, RIGHT)).value == 1.0
    r = await g.grade(PLUS_ONE, READ_JUDGE)  # the judge has held the secret: the same probe
    assert r.value == 1.0, (r.verdict, r.error, r.cases)


# -- (a) a pass for a wrong answer -----------------------------------------------------------------

FORGE_REPORTS = (
    FIND
    + r"""
import json


def _forge():
    # every writable pipe this process can reach through any /proc/<pid>/fd, fed a line of every
    # report kind (no nonce: a guess of the format only), and fds 1 and 2 too
    lines = "".join(x + "\n" for x in (
        json.dumps({"load": "ok"}), json.dumps({"test": 0, "passed": 1, "failed": 0}),
        json.dumps({"case": 0, "passed": True}), json.dumps({"case": 1, "passed": True})))
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                fds = os.listdir(f"/proc/{p}/fd")
            except OSError:
                continue
            for fd in fds:
                try:
                    w = os.open(f"/proc/{p}/fd/{fd}", os.O_WRONLY | os.O_NONBLOCK)
                    os.write(w, lines.encode())
                    os.close(w)
                except OSError:
                    pass
    for fd in (1, 2):
        try:
            os.write(fd, lines.encode())
        except OSError:
            pass


def f(x):
    _forge()
    return x
"""
)


@pytest.mark.parametrize("task", [SECRET_TASK, PLUS_ONE], ids=["assert", "function"])
async def test_forged_report_lines_through_any_reachable_fd_score_zero(sb: AsyncSandbox, task: Task) -> None:
    scored_zero(await grader(sb).grade(task, FORGE_REPORTS))
    await still_right(sb)


# Tricks on the judge's side of the values: a returned value that compares equal to anything is
# data once decoded; exception names that steer control flow; SystemExit / KeyboardInterrupt.
ODD_VALUES = [
    ("always_equal", "class E:\n    def __eq__(self, o):\n        return True\n\ndef f(x):\n    return E()\n"),
    ("int_subclass", "class I(int):\n    def __eq__(self, o):\n        return True\n\ndef f(x):\n    return I(0)\n"),
    ("stop_iteration", "def f(x):\n    raise StopIteration\n"),
    ("system_exit", "def f(x):\n    raise SystemExit(0)\n"),
    ("keyboard_interrupt", "def f(x):\n    raise KeyboardInterrupt\n"),
    ("generator_exit", "def f(x):\n    raise GeneratorExit\n"),
    ("exit_zero_at_call", "import os\n\ndef f(x):\n    os._exit(0)\n"),
    ("exit_zero_at_load", "import os\nos._exit(0)\n"),
    ("exit_70_at_load", "import os\nos._exit(70)\n"),
    ("exit_1_at_load", "import os\nos._exit(1)\n"),
    ("exit_2_at_load", "import os\nos._exit(2)\n"),
    ("exit_125_at_load", "import os\nos._exit(125)\n"),
    ("exit_126_at_load", "import os\nos._exit(126)\n"),
    ("exit_127_at_load", "import os\nos._exit(127)\n"),
    ("exit_137_at_load", "import os\nos._exit(137)\n"),
    ("exit_255_at_load", "import os\nos._exit(255)\n"),
    ("exit_70_at_call", "import os\n\ndef f(x):\n    os._exit(70)\n"),
    ("exit_70_after_load_reply", "import os, struct\nos.read(3, 64)\nos._exit(70)\n"),
    ("killed_at_call", "import os, signal\n\ndef f(x):\n    os.kill(os.getpid(), signal.SIGKILL)\n"),
    ("stopped_at_call", "import os, signal\n\ndef f(x):\n    os.kill(os.getpid(), signal.SIGSTOP)\n"),
    ("close_channel", "import os\n\ndef f(x):\n    os.close(3); os.close(4)\n    return x + 1\n"),
    ("nan", "def f(x):\n    return float('nan')\n"),
]


@pytest.mark.parametrize("name,code", ODD_VALUES, ids=[n for n, _ in ODD_VALUES])
async def test_odd_answers_and_exits_score_zero_not_none(sb: AsyncSandbox, name: str, code: str) -> None:
    """Whatever status the candidate's process exits with (70 included: the host reads a harness's
    70 before any load report as "could not start", an infrastructure error), a judged run's status
    is the judge's, and the wrong answer scores 0."""
    g = grader(sb)
    scored_zero(await g.grade(PLUS_ONE, code))
    scored_zero(await g.grade(SECRET_TASK, code))


@pytest.mark.parametrize("sig", [6, 9, 11, 24, 25, 31])
@pytest.mark.parametrize("when", ["load", "call"])
async def test_a_candidate_that_kills_itself_with_any_signal_scores_zero_not_none(
    sb: AsyncSandbox, sig: int, when: str
) -> None:
    """A judged run's status is the candidate's own where the judge reports it gone: no signal of its
    (SIGABRT, SIGKILL, SIGSEGV, SIGXCPU, SIGXFSZ, SIGSYS) makes the grade a sandbox error."""
    kill = f"import os, signal\nsignal.signal({sig}, signal.SIG_DFL)\nos.kill(os.getpid(), {sig})\n"
    code = (
        kill + RIGHT
        if when == "load"
        else RIGHT.replace("    return", kill.replace("\n", "\n    ")[:-4] + "    return")
    )
    scored_zero(await grader(sb).grade(PLUS_ONE, code))


# -- raw frames on the channel: the judge parses what the candidate writes ------------------------

RAW = """import os, struct, json


def _read_call():
    n, _ = struct.unpack(">II", os.read(3, 8))
    return os.read(3, n)


def _frame(data, body=0, length=None):
    return struct.pack(">II", len(data) if length is None else length, body) + data


_read_call()  # the entry point
os.write(4, _frame(b'{"load":"ok"}'))
_read_call()  # the first call
PAYLOAD
import time
time.sleep(30)
"""
RAW_REPLIES = [
    ("nested_json", "os.write(4, _frame(b'{\"value\":' + b'[' * 200000 + b']' * 200000 + b'}'))"),
    ("nested_value", "os.write(4, _frame(json.dumps({'value': {'list': [{'list': []}]}}).encode()))"),
    ("huge_int", "os.write(4, _frame(b'{\"value\":' + b'9' * 100000 + b'}'))"),
    ("nan_const", "os.write(4, _frame(b'{\"value\":NaN}'))"),
    ("dup_keys", 'os.write(4, _frame(b\'{"value":1,"value":42}\'))'),
    ("too_long", "os.write(4, _frame(b'', length=(16 << 20) + 1))"),
    ("with_body", "os.write(4, _frame(b'{\"value\":42}', body=5) + b'xxxxx')"),
    ("half_frame", "os.write(4, struct.pack('>II', 100, 0) + b'{')"),
    ("not_utf8", 'os.write(4, _frame(b\'{"value":"\\xff\\xfe"}\'))'),
    ("two_replies", "os.write(4, _frame(b'{\"value\":2}') + _frame(b'{\"value\":42}') * 50)"),
    ("load_again", 'os.write(4, _frame(b\'{"load":"ok"}\') * 3)'),
]


@pytest.mark.parametrize("name,payload", RAW_REPLIES, ids=[n for n, _ in RAW_REPLIES])
async def test_malformed_channel_traffic_scores_zero_and_leaves_the_judge_well(
    sb: AsyncSandbox, name: str, payload: str
) -> None:
    r = await grader(sb).grade(PLUS_ONE, RAW.replace("PAYLOAD", payload))
    assert r.value is not None and r.value < 1.0, (r.value, r.verdict, r.error, r.cases)
    await still_right(sb)


async def test_a_reply_that_fills_the_judge_with_a_big_value_leaves_later_grades_right(sb: AsyncSandbox) -> None:
    """~15 MB of a list of small ints: the judge decodes it (hundreds of MB of objects) inside the
    run's memory limit, or is killed there; the grade is 0 either way, and the next one right."""
    code = RAW.replace("PAYLOAD", "os.write(4, _frame(b'{\"value\":[' + b'0,' * 7_000_000 + b'0]}'))")
    r = await Grader(sb, GradingConfig(scan=False, limits=Limits(wall_time=5.0, memory=256 << 20))).grade(
        PLUS_ONE, code
    )
    assert r.value is not None and r.value < 1.0, (r.value, r.verdict, r.error)
    await still_right(sb)


# -- (c) persistence: what a candidate leaves behind for a later grade -----------------------------

LEAVE_BEHIND = (
    FIND
    + r"""
import json, signal, socket, time


def _daemon():
    # a grandchild in a session of its own, every signal it can ignore ignored, that for 20 s keeps
    # trying to reach the judge's descriptors and to stop it
    if os.fork():
        return
    os.setsid()
    if os.fork():
        os._exit(0)
    for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGPIPE):
        signal.signal(s, signal.SIG_IGN)
    end = time.time() + 20
    line = json.dumps({"case": 0, "passed": True}) + "\n"
    while time.time() < end:
        for p in _others():
            try:
                for fd in os.listdir(f"/proc/{p}/fd"):
                    try:
                        w = os.open(f"/proc/{p}/fd/{fd}", os.O_WRONLY | os.O_NONBLOCK)
                        os.write(w, line.encode())
                        os.close(w)
                    except OSError:
                        pass
            except OSError:
                pass
        time.sleep(0.01)
    os._exit(0)


def _sysv():
    # a SysV segment, queue and semaphore set, keyed for a later run to find
    _libc.shmget(0x4A55, 4096, 0o1666)
    _libc.msgget(0x4A55, 0o1666)
    _libc.semget(0x4A55, 1, 0o1666)


def _abstract():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.bind(b"\0judge-attack")
        s.listen(1)
    except OSError:
        pass
    return s


_keep = _abstract()
_sysv()
_daemon()
open("/box/left.txt", "w").write("x")
try:
    open("/tmp/left.txt", "w").write("x")
except OSError:
    pass


def f(x):
    return x
"""
)

LOOK_FOR_LEFTOVERS = (
    FIND
    + r"""
import socket


def f(x):
    seen = {}
    seen["shm"] = _libc.shmget(0x4A55, 0, 0) >= 0
    seen["msg"] = _libc.msgget(0x4A55, 0) >= 0
    seen["sem"] = _libc.semget(0x4A55, 0, 0) >= 0
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(b"\0judge-attack")
        seen["abstract"] = True
    except OSError:
        pass
    seen["box"] = os.path.exists("/box/left.txt")
    seen["tmp"] = os.path.exists("/tmp/left.txt")
    seen["processes"] = len(_others())  # the forker and the judge: 2
    return seen
"""
)


async def test_nothing_a_candidate_leaves_reaches_the_next_grade(sb: AsyncSandbox) -> None:
    g = grader(sb)
    scored_zero(await g.grade(PLUS_ONE, LEAVE_BEHIND))
    # the daemon, were it alive, would write pass lines for a wrong answer into every fd it reaches
    scored_zero(await g.grade(PLUS_ONE, WRONG))
    look = await call_function(sb, Program(language="python", source=LOOK_FOR_LEFTOVERS), "f", [0], {}, Limits())
    assert look.returned, look.result
    assert look.value == {"shm": False, "msg": False, "sem": False, "box": False, "tmp": False, "processes": 2}
    await still_right(sb)


# Poisoning the judge's process from outside: its scheduling, its limits, its OOM score, its
# signals. Root mode: another uid, so every call fails. Rootless: the judge and the candidate are one
# user outside (kuid), so the kernel's same-user checks (prlimit, setpriority, sched_setaffinity,
# /proc/<pid>/oom_score_adj) let the candidate change the judge, and what it changes persists.
POISON = (
    FIND
    + r"""
class _Rlimit(ctypes.Structure):
    _fields_ = [("cur", ctypes.c_uint64), ("max", ctypes.c_uint64)]


def _nofile(p):
    lim = _Rlimit(3, 3)  # RLIMIT_NOFILE: no room for the next job's descriptors
    return _libc.prlimit(p, 7, ctypes.byref(lim), None) == 0


def _nice(p):
    return _libc.setpriority(0, p, 19) == 0


def _oom(p):
    try:
        open(f"/proc/{p}/oom_score_adj", "w").write("1000")
        return True
    except OSError:
        return False


DONE = [p for p in TARGETS if WHAT(p)]


def f(x):
    return x + 1
"""
)


def poison(what: str, targets: str) -> str:
    """The candidate: at load, ``what`` (``_nofile``, ``_nice``, ``_oom``) done to ``targets`` (an
    expression of the candidate's: ``[_judge()]``, ``_others() + [1]``); a right answer."""
    return POISON.replace("TARGETS", targets).replace("WHAT", what)


# Reads the judge's nice value and OOM score adjustment (fields of /proc, readable by anyone).
JUDGE_STATE = (
    FIND
    + r"""
def f(x):
    j = _judge()
    nice = int(open(f"/proc/{j}/stat").read().rsplit(")", 1)[1].split()[16])
    return [nice, int(open(f"/proc/{j}/oom_score_adj").read())]
"""
)


async def test_a_candidate_cannot_limit_the_judges_descriptors_to_fail_the_next_grade(sb: AsyncSandbox) -> None:
    """Rootless, the judge and the candidate are one user outside their namespaces, and prlimit(2) on
    another process needs only that: an RLIMIT_NOFILE of 3 made the judge's next recvmsg get no
    descriptors and the NEXT grade (another task's right answer) score 0. The zygote replaces a judge
    whose rlimits, nice value, OOM score or affinity changed before its next job (root mode: EPERM).

    The poisoning run itself races its judge (the candidate loads while the judge reads its job): its
    right answer where the judge held this job's descriptors first, else a failed run (the judge could
    not take the job), never an infrastructure error that would spare it its 0."""
    poisoned = Program(language="python", source=poison("_nofile", "[_judge()]"))
    got = await call_function(sb, poisoned, "f", [1], {}, LIMITS)
    failed = got.result.verdict is Verdict.RUNTIME_ERROR and got.result.sandbox_error is None
    assert (got.returned and got.value == 2) or (not got.returned and failed), got.result
    graded = await grader(sb).grade(PLUS_ONE, poisoned.source)
    assert graded.value in (0.0, 1.0), (graded.value, graded.verdict, graded.error)
    later = await grader(sb).grade(PLUS_ONE, RIGHT)
    assert later.value == 1.0, (later.value, later.verdict, later.error, later.cases)


@pytest.mark.parametrize("what", ["_nice", "_oom"])
async def test_a_candidate_cannot_change_how_the_judge_is_scheduled_or_chosen_by_the_oom_killer(
    sb: AsyncSandbox, what: str
) -> None:
    got = await call_function(sb, Program(language="python", source=poison(what, "[_judge()]")), "f", [1], {},
                              LIMITS)  # fmt: skip
    assert got.returned and got.value == 2, got.result
    await still_right(sb)
    look = await call_function(sb, Program(language="python", source=JUDGE_STATE), "f", [0], {}, LIMITS)
    assert look.returned and look.value == [0, 0], (look.result, look.value)


async def test_a_candidate_cannot_limit_the_zygote_or_the_forker(sb: AsyncSandbox) -> None:
    """The slot's other residents: RLIMIT_NOFILE of 3 on pid 1 (the zygote) and every other process."""
    got = await call_function(sb, Program(language="python", source=poison("_nofile", "_others() + [1]")), "f",
                              [1], {}, LIMITS)  # fmt: skip
    assert got.result.verdict is not None
    await still_right(sb)


SIGNAL_JUDGE = (
    FIND
    + r"""
import signal


def f(x):
    j = _judge()
    for s in (signal.SIGSTOP, signal.SIGTERM, signal.SIGXCPU, signal.SIGSEGV, signal.SIGUSR1):
        try:
            os.kill(j, s)
        except OSError:
            pass
    return x
"""
)


async def test_a_candidate_that_stops_or_signals_the_judge_gets_zero_and_the_next_grade_is_right(
    sb: AsyncSandbox,
) -> None:
    """Root mode: no signal reaches the judge. Rootless: SIGSTOP does (one user outside); the judge is
    continued before the next job. A wrong answer never becomes None or a pass."""
    r = await grader(sb).grade(PLUS_ONE, SIGNAL_JUDGE)
    assert r.value is not None and r.value < 1.0, (r.value, r.verdict, r.error)
    await still_right(sb)


# -- (d)/(e) time and exhaustion -------------------------------------------------------------------

EXHAUST = [
    (
        "fork_bomb",
        "import os\n\ndef f(x):\n    while True:\n        try:\n            os.fork()\n"
        "        except OSError:\n            pass\n",
    ),
    (
        "child_holds_channel",
        "import os, time\n\ndef f(x):\n    if os.fork() == 0:\n        time.sleep(60)\n    os._exit(0)\n",
    ),
    ("spin", "def f(x):\n    while True:\n        pass\n"),
    ("stderr_flood", "import os\n\ndef f(x):\n    while True:\n        os.write(2, b'x' * 65536)\n"),
    (
        "close_stderr_dup_channel",
        "import os\nos.dup2(4, 2)\nos.dup2(4, 1)\n\ndef f(x):\n    print('{}')\n    return x\n",
    ),
    ("memory", "def f(x):\n    a = []\n    while True:\n        a.append(bytearray(1 << 24))\n"),
]


@pytest.mark.parametrize("name,code", EXHAUST, ids=[n for n, _ in EXHAUST])
async def test_exhaustion_scores_zero_and_the_slot_grades_on(sb: AsyncSandbox, name: str, code: str) -> None:
    r = await Grader(sb, GradingConfig(scan=False, limits=Limits(wall_time=1.5, cpu_time=1.0))).grade(PLUS_ONE, code)
    scored_zero(r)
    await still_right(sb)


async def test_check_code_that_blows_the_judges_recursion_limit_leaves_it_reset(sb: AsyncSandbox) -> None:
    """A check whose call recurses: the judge's recursion limit is the same at the next job."""
    deep = "def check(candidate):\n    import sys\n    sys.setrecursionlimit(50)\n    assert candidate(1) == 2\n"
    job = assert_job("f", [rewrite_asserts(deep)[0]], 1e-6)
    await run_harness(sb, RIGHT, job, LIMITS)
    await still_right(sb)


async def test_many_grades_in_a_row_on_one_judge_stay_right(sb: AsyncSandbox) -> None:
    """Alternating hostile and honest grades on the one judge: each honest one scores 1."""
    g = grader(sb)
    for hostile in (FORGE_REPORTS, SIGNAL_JUDGE, LEAVE_BEHIND, ODD_VALUES[5][1]):
        h = await g.grade(PLUS_ONE, hostile)
        assert h.value is not None and h.value < 1.0, (h.value, h.error)
        ok = await g.grade(PLUS_ONE, RIGHT)
        assert ok.value == 1.0, (ok.verdict, ok.error)


# -- the judge's imports: a module the candidate plants in /box, imported lazily by the judge -----

PLANT = r"""import base64, binascii, os, sys  # (its own encoding needs base64 before the plant)

NAMES = ("base64", "binascii", "struct", "decimal", "fractions", "traceback", "linecache", "textwrap",
         "datetime", "collections", "functools", "itertools", "re", "math", "string", "copy", "heapq",
         "hashlib", "random", "operator", "statistics", "bisect", "typing", "numbers", "unittest")
for name in NAMES:
    with open(f"/box/{name}.py", "w") as fh:
        fh.write("import os\nif os.getuid() != %d:\n    os.write(2, b'PLANTED-RAN-' + __name__.encode() + b'\\n')\n"
                 % os.getuid())
os.makedirs("/box/__pycache__", exist_ok=True)


def f(x):
    return {"bytes": b"\x00\xff", "set": {1, 2}, "complex": 1j, "tuple": (1,), "float": 0.5}
"""


async def test_modules_planted_in_box_never_run_in_the_judge(sb: AsyncSandbox) -> None:
    check = (
        "def check(candidate):\n    import decimal, fractions, datetime, statistics, textwrap\n"
        "    v = candidate(1)\n    assert v == 2, repr(v)\n"
    )
    job = assert_job("f", [rewrite_asserts(check)[0]], 1e-6)
    # a fresh judge (a new IPC generation: a run that leaves a SysV object) imports nothing yet
    await grader(sb).grade(PLUS_ONE, LEAVE_BEHIND)
    run = await run_harness(sb, PLANT, job, LIMITS)
    assert "PLANTED-RAN" not in run.result.stderr, run.result.stderr[-2000:]
    assert run.tests[0]["passed"] == 0, run
