"""The forker (dojo/sandbox/forker.c): runs it forks are set up exactly as the zygote's own forks
(``RunChild.child``, the Python set-up it replaces) set them up; a run can neither use it nor, by
killing or stopping it, break the slot for the next run; and it follows what the zygote learns
(a newly compiled harness, a new IPC namespace)."""

from __future__ import annotations

import json
import os
import re
import signal
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from dojo.sandbox import AsyncSandbox, Limits, Program
from dojo.sandbox.forker_build import forker_library
from dojo.sandbox.verdict import Verdict
from tests.sandbox.conftest import SKIP_REASON, requires_isolation

pytestmark = requires_isolation

# Everything of a run's process that its set-up decides, as the run sees it.
PROBE = r"""
import json, os, resource, signal, ctypes, sys

def probe():
    status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines() if ":" in line)
    fds = sorted(os.listdir("/proc/self/fd"))
    umask = os.umask(0o022)
    return json.dumps({
        "ids": [len(set(os.getresuid())), len(set(os.getresgid())), os.getuid() == os.getgid(), os.getuid() > 0,
                os.getgroups()],
        "session_leader": os.getsid(0) == os.getpid(),
        "parent": os.getppid(),
        "others": sorted(int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, os.getpid())) != [],
        "fds": fds,
        "rlimits": {n: resource.getrlimit(getattr(resource, n)) for n in dir(resource) if n.startswith("RLIMIT_")},
        "oom_score_adj": open("/proc/self/oom_score_adj").read().strip(),
        "status": {k: status[k].strip() for k in ("NoNewPrivs", "Seccomp", "CapEff", "CapPrm", "CapBnd", "CapInh",
                                                  "SigBlk", "SigIgn")},
        "dumpable": ctypes.CDLL(None).prctl(3, 0, 0, 0, 0),
        "cwd": os.getcwd(),
        "umask": umask,
        "environ": dict(os.environ),
        "argv": sys.argv,
        "sigint": str(signal.getsignal(signal.SIGINT)),
        "stdin": sys.stdin.read(),
    }, sort_keys=True)
"""

SHELL_PROBE = r"""
grep -E '^(Uid|Gid|Groups|NoNewPrivs|Seccomp|CapEff|CapPrm|CapBnd|SigBlk|SigIgn)' /proc/self/status
ulimit -a
cat /proc/self/oom_score_adj
pwd; umask; env | sort; ls /proc/self/fd | wc -l
"""


@pytest_asyncio.fixture(scope="module")
async def both() -> AsyncIterator[tuple[AsyncSandbox, AsyncSandbox]]:
    """One slot whose runs the forker forks, and one whose zygote forks them itself."""
    if SKIP_REASON:
        pytest.skip(SKIP_REASON)
    assert forker_library() is not None, "the forker must build on a machine with a C compiler"
    async with AsyncSandbox(pool_size=1) as forked, AsyncSandbox(pool_size=1, forker=False) as direct:
        yield forked, direct


def probe_result(stdout: str) -> dict[str, object]:
    """The probe's report, with the address-space limit (rootless: the run's memory plus the size of
    the zygote it was forked from, which the forker's library makes a few pages larger) in MiB."""
    seen = dict(json.loads(stdout))
    rlimits = dict(seen["rlimits"])
    rlimits["RLIMIT_AS"] = [-1 if v < 0 else round(v / (1 << 20)) for v in rlimits["RLIMIT_AS"]]
    seen["rlimits"] = rlimits
    return seen


def without_ids(shell_output: str) -> str:
    """The shell probe's output with the slot's own uid (each slot has one) replaced by "U"."""
    uid = re.search(r"^Uid:\t(\d+)", shell_output, re.M)
    assert uid is not None and uid.group(1) != "0"
    return shell_output.replace(uid.group(1), "U")


@pytest.mark.asyncio
async def test_a_python_run_is_set_up_alike_either_way(both: tuple[AsyncSandbox, AsyncSandbox]) -> None:
    forked, direct = both
    program = Program(language="python", source=PROBE + "print(probe())\n", stdin="hello", args=["a", "b c"])
    a, b = await forked.run(program), await direct.run(program)
    assert a.verdict is Verdict.ACCEPTED, a.stderr
    assert b.verdict is Verdict.ACCEPTED, b.stderr
    seen_a, seen_b = probe_result(a.stdout), probe_result(b.stdout)
    assert seen_a.pop("others") is True  # the forker, beside the zygote: it is the one that forked this run
    assert seen_b.pop("others") is False
    assert seen_a == seen_b
    assert seen_a["parent"] == 1 and seen_a["session_leader"] and seen_a["stdin"] == "hello"


@pytest.mark.asyncio
async def test_a_harness_run_is_set_up_alike_either_way(both: tuple[AsyncSandbox, AsyncSandbox]) -> None:
    """A harness: non-dumpable, every signal blocked, its private stdin, its main() called."""
    forked, direct = both
    program = Program(language="python", source=PROBE + "def main():\n    print(probe())\n", stdin="secret")
    a, b = await forked.run(program, harness=True), await direct.run(program, harness=True)
    assert a.verdict is Verdict.ACCEPTED, a.stderr
    assert b.verdict is Verdict.ACCEPTED, b.stderr
    seen_a, seen_b = probe_result(a.stdout), probe_result(b.stdout)
    seen_a.pop("others"), seen_b.pop("others")
    assert seen_a == seen_b
    assert seen_a["dumpable"] == 0 and seen_a["stdin"] == "secret"
    assert int(str(dict(seen_a["status"])["SigBlk"]), 16) != 0  # type: ignore[call-overload]


@pytest.mark.asyncio
async def test_an_executed_program_is_set_up_alike_either_way(both: tuple[AsyncSandbox, AsyncSandbox]) -> None:
    forked, direct = both
    program = Program(language="bash", source=SHELL_PROBE)
    a, b = await forked.run(program), await direct.run(program)
    assert a.verdict is Verdict.ACCEPTED, a.stderr
    assert without_ids(a.stdout) == without_ids(b.stdout)
    assert "NoNewPrivs:\t1" in a.stdout and "Gid:\tU\tU\tU\tU" in without_ids(a.stdout)


@pytest.mark.asyncio
async def test_a_run_cannot_use_the_forker_or_break_the_slot_with_it(both: tuple[AsyncSandbox, AsyncSandbox]) -> None:
    """A run reads nothing of the forker's memory; where it may signal it (rootless: the same user),
    stopping or killing it still leaves the next run its normal verdict."""
    forked, _ = both
    attack = r"""
import os, signal
forker = [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, os.getpid())][0]
for path in ("mem", "environ", "maps"):
    try:
        open(f"/proc/{forker}/{path}", "rb").read(16)
        print("read", path)
    except OSError:
        pass
for sig in (signal.SIGSTOP, signal.SIGKILL):
    try:
        os.kill(forker, sig)
        print("signalled", sig.name)
    except OSError:
        pass
"""
    for _ in range(3):
        attacked = await forked.run(Program(language="python", source=attack))
        assert attacked.verdict is Verdict.ACCEPTED, attacked.stderr
        assert "read" not in attacked.stdout
        after = await forked.run(Program(language="python", source="print(6 * 7)"))
        assert after.verdict is Verdict.ACCEPTED, after.stderr
        assert after.stdout == "42\n"


@pytest.mark.asyncio
async def test_a_forker_stopped_from_outside_holds_no_run(
    both: tuple[AsyncSandbox, AsyncSandbox],
) -> None:
    """Anyone on the host who may signal the forker (an operator, bench/soak.py's faults) can stop it:
    the next run is still forked and gets its normal verdict (it waited for the slot's timeout, 15 s
    here, and was a SandboxError), by the same forker, continued."""
    forked, _ = both
    program = Program(language="python", source="print(6 * 7)")
    assert (await forked.run(program)).stdout == "42\n"  # its code is now in the forker's snapshot
    (unshare,) = [slot.pid for slot in forked.pool._slots.values()]
    assert unshare is not None
    (zygote,) = children_of(unshare)
    (forker,) = children_of(zygote)
    for _ in range(3):
        os.kill(forker, signal.SIGSTOP)
        result = await forked.run(program, Limits(wall_time=5))
        assert result.verdict is Verdict.ACCEPTED and result.stdout == "42\n", result
        assert children_of(zygote) == [forker]


def children_of(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return [int(p) for p in f.read().split()]


@pytest.mark.asyncio
async def test_the_forker_follows_a_newly_compiled_harness(both: tuple[AsyncSandbox, AsyncSandbox]) -> None:
    """Each new cached main file is compiled by the zygote after the forker was forked: the run must
    still get that file's code, not an earlier one's."""
    forked, _ = both
    for n in range(4):
        source = f"def main():\n    print({n})\n"
        for _ in range(2):
            result = await forked.run(Program(language="python", source=source), harness=True)
            assert result.verdict is Verdict.ACCEPTED, result.stderr
            assert result.stdout == f"{n}\n"


@pytest.mark.asyncio
async def test_runs_after_an_ipc_namespace_change_start_empty(both: tuple[AsyncSandbox, AsyncSandbox]) -> None:
    """A run that leaves a SysV segment moves the zygote to a new IPC namespace; the forker's next
    run must be there too (the old forker is replaced), and see nothing."""
    forked, _ = both
    leave = "import ctypes; libc = ctypes.CDLL(None); print(libc.shmget(0, 4096, 0o1600) >= 0)"
    look = "print(len(open('/proc/sysvipc/shm').read().splitlines()) - 1)"
    for _ in range(2):
        left = await forked.run(Program(language="python", source=leave))
        assert left.stdout == "True\n", left.stderr
        seen = await forked.run(Program(language="python", source=look))
        assert seen.stdout == "0\n", seen.stderr


@pytest.mark.asyncio
async def test_a_run_too_large_for_the_forkers_message_is_forked_by_the_zygote(
    both: tuple[AsyncSandbox, AsyncSandbox],
) -> None:
    """Arguments and environment beyond the forker's 64 KiB message take the zygote's own fork; then
    the forker serves the next run again."""
    forked, _ = both
    big = Program(language="python", source="import os, sys; print(len(os.environ['BIG']), len(sys.argv[1]))",
                  env={"BIG": "x" * 70_000}, args=["y" * 70_000])  # fmt: skip
    result = await forked.run(big)
    assert result.verdict is Verdict.ACCEPTED, result.stderr
    assert result.stdout == "70000 70000\n"
    after = await forked.run(Program(language="python", source="print(1)"))
    assert after.stdout == "1\n"


@pytest.mark.asyncio
async def test_each_run_gets_its_own_environment_when_they_alternate_or_repeat(
    both: tuple[AsyncSandbox, AsyncSandbox],
) -> None:
    """The forker adopts an environment seen twice running; a run with another still gets exactly its own."""
    forked, _ = both
    show = "import os; print(os.environ.get('A'), os.environ.get('B'), sorted(k for k in os.environ if len(k) == 1))"
    for env in ({"A": "1"}, {"B": "2"}, {"A": "1"}, {"A": "1"}, {"A": "1"}, {"B": "2"}, {}, {}, {"A": "3", "B": "4"}):
        result = await forked.run(Program(language="python", source=show, env=env))
        assert result.verdict is Verdict.ACCEPTED, result.stderr
        assert result.stdout == f"{env.get('A')} {env.get('B')} {sorted(env)}\n"


SPLIT_HARNESS = """import json, os


def candidate_main():
    seen = {"parent": os.getppid(), "pid": os.getpid(), "fds": sorted(os.listdir("/proc/self/fd")),
            "stdin": os.read(0, 10).decode(), "stdout_is_stderr": os.fstat(1).st_ino == os.fstat(2).st_ino,
            "sigblk": [l.split()[1] for l in open("/proc/self/status") if l.startswith("SigBlk")][0]}
    os.write(4, json.dumps(seen).encode())
    os._exit(0)


def main(split=None):
    if split is None:
        print("not split")
        return
    pid, call_w, reply_r = split
    os.close(call_w)
    seen = json.loads(os.read(reply_r, 4096))
    os.waitpid(pid, 0)
    print(json.dumps({"me": os.getpid(), "candidate": pid, "seen": seen, "stdin": os.read(0, 10).decode()}))
"""


@pytest.mark.asyncio
async def test_the_forker_forks_a_harness_candidate_process_before_any_python_runs(
    both: tuple[AsyncSandbox, AsyncSandbox],
) -> None:
    """A protected preloaded harness that defines ``candidate_main`` gets its two processes from the
    forker (forker.c's ``split_harness``): the candidate's is the trusted one's child, with fd 0
    /dev/null, fds 1 and 2 the run's stderr, its channel's ends at 3 and 4 and nothing else, no
    signal blocked; the trusted one keeps the private stdin. The zygote's own fork does not split."""
    forked, direct = both
    program = Program(language="python", source=SPLIT_HARNESS, stdin="job")
    a = await forked.run(program, harness=True)
    b = await direct.run(program, harness=True)
    assert a.verdict is Verdict.ACCEPTED and b.verdict is Verdict.ACCEPTED, (a.stderr, b.stderr)
    assert b.stdout == "not split\n"
    report = json.loads(a.stdout)
    seen = report["seen"]
    assert seen["parent"] == report["me"] and seen["pid"] == report["candidate"]
    assert seen["fds"] == ["0", "1", "2", "3", "4", "5"]  # 5: the listing's own
    assert seen["stdin"] == "" and seen["stdout_is_stderr"] and int(seen["sigblk"], 16) == 0
    assert report["stdin"] == "job"


# The grading harness's judge (dojo.sandbox.guest.judge): where the forker makes runs, a grading
# run's trusted side is a process that lives as long as the slot, forked before any job.
LOOK_AROUND = """import os


def look():
    me, uids = os.getpid(), []
    for p in os.listdir("/proc"):
        if p.isdigit() and int(p) not in (1, me):
            try:
                uids += [int(l.split()[1]) for l in open(f"/proc/{p}/status") if l.startswith("Uid:")]
            except OSError:
                pass
    return [os.getuid(), sorted(uids)]
"""

# Stops, then kills, every process it can see, at load and again in the call.
ATTACK = """import os, signal


def everyone_else():
    for p in os.listdir("/proc"):
        if p.isdigit() and int(p) != os.getpid():
            for sig in SIGNALS:
                try:
                    os.kill(int(p), sig)
                except OSError:
                    pass


def f(x):
    everyone_else()
    return x + 1


SIGNALS = (SENT)
everyone_else()
"""


@pytest.mark.asyncio
async def test_a_grading_run_is_judged_by_a_process_of_its_own_uid(both: tuple[AsyncSandbox, AsyncSandbox]) -> None:
    """The candidate's process sees the judge, of a uid of its own (root mode: the run's + 2**30;
    rootless: one user outside, but a user namespace of its own), and the same judge grades run
    after run; without a forker there is none."""
    from dojo.rewards.harness import call_function

    forked, direct = both
    program = Program(language="python", source=LOOK_AROUND)
    first = await call_function(forked, program, "look", [], {}, Limits())
    second = await call_function(forked, program, "look", [], {}, Limits())
    plain = await call_function(direct, program, "look", [], {}, Limits())
    assert first.returned and second.returned and plain.returned, (first.result, plain.result)
    uid, others = first.value
    if uid != 1000:  # root mode (rootless runs see themselves as 1000)
        assert uid + 2**30 in others and uid + 2**30 in second.value[1]
        assert uid + 2**30 not in plain.value[1]
    assert len(others) == len(second.value[1])  # no judge left over, none added


@pytest.mark.asyncio
@pytest.mark.parametrize("signals", ["signal.SIGSTOP, signal.SIGKILL", "signal.SIGSTOP,"])
async def test_a_candidate_that_signals_everyone_never_breaks_a_grade_or_the_slot(
    both: tuple[AsyncSandbox, AsyncSandbox], signals: str
) -> None:
    """Root mode: no signal of the candidate's reaches the judge, so its right answer counts. Rootless
    (one user outside): a judge killed or stopped fails that grade (a value of its own, never a
    sandbox error), and the next grade on the slot is judged again."""
    from dojo.rewards.harness import call_function

    forked, _ = both
    attack = Program(language="python", source=ATTACK.replace("SENT", signals))
    hit = await call_function(forked, attack, "f", [1], {}, Limits(wall_time=3))
    assert hit.result.verdict is not Verdict.SANDBOX_ERROR, hit.result
    uid_probe = await call_function(forked, Program(language="python", source=LOOK_AROUND), "look", [], {}, Limits())
    if uid_probe.value[0] != 1000:
        assert hit.returned and hit.value == 2, hit.result
    else:
        assert hit.value in (None, 2)
    after = await call_function(forked, Program(language="python", source="def g():\n    return 7\n"), "g", [], {},
                                Limits())  # fmt: skip
    assert after.returned and after.value == 7, after.result


@pytest.mark.asyncio
async def test_check_code_that_never_ends_stops_at_the_wall_limit_and_the_judge_is_replaced(
    both: tuple[AsyncSandbox, AsyncSandbox],
) -> None:
    from dojo.rewards.harness import assert_job, rewrite_asserts, run_harness

    forked, _ = both
    job = assert_job("f", ["def check(candidate):\n    while True:\n        pass\n"], 1e-6)
    run = await run_harness(forked, "def f():\n    return 1\n", job, Limits(wall_time=2))
    assert run.result.limit is not None and run.result.limit.value == "wall_time", run.result
    assert run.load == {"load": "ok"} and run.tests == {}
    job = assert_job("f", [rewrite_asserts("def check(candidate):\n    assert candidate() == 1\n")[0]], 1e-6)
    run = await run_harness(forked, "def f():\n    return 1\n", job, Limits())
    assert run.tests[0]["passed"] == 1 and run.tests[0]["failed"] == 0, run
