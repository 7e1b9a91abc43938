"""The trust boundary of the grading harness, observed from inside the candidate's process: what
it can reach of the trusted process, of the job, and of the report channel."""

from __future__ import annotations

import pytest

from dojo.rewards import Grader, GradingConfig, InvalidTask
from dojo.rewards.audit import audit_tasks
from dojo.rewards.graders import check_program
from dojo.rewards.harness import (
    assert_job,
    call_function,
    check_context,
    function_job,
    rewrite_asserts,
    run_harness,
)
from dojo.sandbox import AsyncSandbox, InputFile, Limits, Program, Verdict
from dojo.tasks import Task, TestCase, load_humaneval
from dojo.tasks.values import decode_value
from tests.rewards.hack_corpus import READ_MEMORY

# Run as the candidate: it reports what it could reach. The grader passes it only if it reached
# nothing, so a reward of 1.0 is the boundary holding (and the detail says what leaked if not).
PROBE = (
    READ_MEMORY
    + r"""
import ctypes, os, re, sys


def _can(fn):
    try:
        fn()
        return True
    except Exception:
        return False


def _memory_has(pattern):  # a pattern that does not match its own text
    return re.search(pattern, _memory()) is not None


def probe():
    ppid = os.getppid()
    libc = ctypes.CDLL(None, use_errno=True)
    local = (ctypes.c_char * 16)()
    iov_local = (ctypes.c_void_p * 2)(ctypes.addressof(local), 16)
    iov_remote = (ctypes.c_void_p * 2)(0x400000, 16)
    fds = sorted(int(x) for x in os.listdir("/proc/self/fd"))
    # every other process it can see: the zygote, the forker, and the slot's judge where there is one
    others = [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]
    return {
        "others_memory": [p for p in others if _can(lambda: open(f"/proc/{p}/mem", "rb").read(1))],
        # (rootless: a non-dumpable process's /proc files belong to the slot's one user, so the
        # numbers of its fds can be listed; what they are cannot be reached)
        "others_fds": [p for p in others if _can(lambda: os.readlink(f"/proc/{p}/fd/0"))],
        "others_environ": [p for p in others if _can(lambda: open(f"/proc/{p}/environ", "rb").read(1))],
        "others_ptrace": [p for p in others if libc.ptrace(16, p, 0, 0) == 0],
        "others_vm_readv": [p for p in others if libc.process_vm_readv(p, iov_local, 1, iov_remote, 1, 0) >= 0],
        "parent_memory": _can(lambda: open(f"/proc/{ppid}/mem", "rb").read(1)),
        "parent_maps": _can(lambda: open(f"/proc/{ppid}/maps").read(1)),
        "parent_fd_report": _can(lambda: open(f"/proc/{ppid}/fd/1", "w")),
        "parent_fd_job": _can(lambda: open(f"/proc/{ppid}/fd/0", "rb")),
        "parent_environ": _can(lambda: open(f"/proc/{ppid}/environ", "rb").read(1)),
        "ptrace_parent": libc.ptrace(16, ppid, 0, 0) == 0,
        "process_vm_readv": libc.process_vm_readv(ppid, iov_local, 1, iov_remote, 1, 0) >= 0,
        "holds_report_channel": os.fstat(1).st_ino != os.fstat(2).st_ino,
        "stray_fds": [fd for fd in fds if fd > 5],
        "signals_blocked": [line for line in open("/proc/self/status") if line.startswith("SigBlk:")
                            and int(line.split()[1], 16) != 0],
        "stdin": sys.stdin.read(),
        "job_in_memory": _memory_has(rb"CHECK[-]SECRET[-]4711"),
        "writable_shared_mappings": [line.split()[-1] for line in open("/proc/self/maps")
                                     if line.split()[1][1] == "w" and line.split()[1][3] == "s"],
    }
"""
)
CLEAN = {
    "others_memory": [], "others_fds": [], "others_environ": [], "others_ptrace": [], "others_vm_readv": [],
    "parent_memory": False, "parent_maps": False, "parent_fd_report": False, "parent_fd_job": False,
    "parent_environ": False, "ptrace_parent": False, "process_vm_readv": False,
    "holds_report_channel": False, "stray_fds": [], "signals_blocked": [], "stdin": "", "job_in_memory": False,
    "writable_shared_mappings": [],
}  # fmt: skip


def probe_task(form: str) -> Task:
    if form == "function":
        tests = [TestCase(args=["CHECK-SECRET-4711"], expected=CLEAN, visible=True)]
        return Task(id="probe", form="function", prompt="", entry_point="probe", tests=tests)
    check = f"def check(candidate):\n    # CHECK-SECRET-4711\n    assert candidate() == {CLEAN!r}\n"
    return Task(id="probe", form="assert", prompt="", entry_point="probe", tests=[TestCase(code=check)])


@pytest.mark.parametrize("form", ["function", "assert"])
async def test_the_candidates_process_reaches_nothing_of_the_trusted_one(fast_sandbox: AsyncSandbox, form: str) -> None:
    task = probe_task(form)
    if form == "function":
        task = task.model_copy(update={"tests": [TestCase(args=[], expected=CLEAN, visible=True)]})
    r = await Grader(fast_sandbox, GradingConfig(scan=False)).grade(task, PROBE)
    assert r.value == 1.0, r.cases


async def test_an_earlier_runs_job_is_not_in_a_later_candidates_memory(fast_sandbox: AsyncSandbox) -> None:
    grader = Grader(fast_sandbox, GradingConfig(scan=False))
    secret = probe_task("assert")
    for _ in range(4):  # every slot of the pool has graded a check that holds the secret
        await grader.grade(secret, "def probe():\n    return None\n")
    look = Task(id="look", form="function", prompt="", entry_point="probe",
                tests=[TestCase(args=[], expected=CLEAN, visible=True)])  # fmt: skip
    rewards = await grader.grade_many([(look, PROBE)] * 4)
    assert [r.value for r in rewards] == [1.0] * 4, rewards[0].cases


async def test_helpers_come_from_the_task_never_from_the_candidate(fast_sandbox: AsyncSandbox) -> None:
    prompt = "def helper(x):\n    return x + 1\n\n\ndef solve(x):\n    pass\n"
    check = "def check(candidate):\n    assert candidate(helper(1)) == 4\n"
    task = Task(id="h", form="assert", prompt=prompt, entry_point="solve", tests=[TestCase(code=check)])
    grader = Grader(fast_sandbox, GradingConfig(scan=False))
    assert (await grader.grade(task, "def solve(x):\n    return x * 2\n")).value == 1.0
    # redefining the helper changes nothing the check computes
    cheat = "def helper(x):\n    return 7\n\ndef solve(x):\n    return 4 if x == 7 else 0\n"
    assert (await grader.grade(task, cheat)).value == 0.0
    assert check_context(prompt, "solve") == "def helper(x):\n    return x + 1"
    assert check_context("Write a function.") == ""


async def test_a_malformed_reply_fails_the_case_and_is_flagged(fast_sandbox: AsyncSandbox) -> None:
    task = Task(id="sq", form="function", prompt="", entry_point="sq",
                tests=[TestCase(args=[2], expected=4), TestCase(args=[3], expected=9)])  # fmt: skip
    cheat = 'import json\njson.dumps = lambda *a, **k: \'{"value": 4, "value": NaN\'\ndef sq(x):\n    return x * x\n'
    r = await Grader(fast_sandbox, GradingConfig(scan=False)).grade(task, cheat)
    assert r.value == 0.0 and "suspicious:malformed_reply" in r.flags
    assert "malformed" in r.cases[0].detail


async def test_assert_truth_must_be_a_bool(fast_sandbox: AsyncSandbox) -> None:
    check = "def check(candidate):\n    assert candidate(1)\n    assert not candidate(0)\n"
    task = Task(id="b", form="assert", prompt="", entry_point="f", tests=[TestCase(code=check)])
    grader = Grader(fast_sandbox, GradingConfig(scan=False, mode="fraction"))
    assert (await grader.grade(task, "def f(x):\n    return x == 1\n")).value == 1.0
    truthy = await grader.grade(task, "def f(x):\n    return 'yes' if x else []\n")
    assert truthy.value == 0.0  # 'yes' is not True and [] is not False


async def test_a_check_that_does_not_compile_is_a_task_error_not_a_reward(fast_sandbox: AsyncSandbox) -> None:
    broken = Task(id="broken/7", form="assert", prompt="", entry_point="f",
                  tests=[TestCase(code="def check(candidate):\n    assert candidate(1) ==\n")],
                  reference="def f(x):\n    return x\n")  # fmt: skip
    with pytest.raises(InvalidTask, match="broken/7"):
        await Grader(fast_sandbox).grade(broken, "def f(x):\n    return x\n")
    trivial = [TestCase(code="def check(candidate):\n    assert True\n")]
    helpers_fail = broken.model_copy(update={"prompt": "import no_such_module_here\n", "tests": trivial})
    with pytest.raises(InvalidTask, match=r"broken/7.*no_such_module_here"):
        await Grader(fast_sandbox).grade(helpers_fail, "def f(x):\n    return x\n")
    report = await audit_tasks([broken], fast_sandbox, repeats=1)
    [audit] = report.tasks
    assert audit.status == "error" and audit.problems[0].startswith("invalid_check: task broken/7")
    with pytest.raises(SyntaxError):
        rewrite_asserts("assert (")


async def test_call_function_is_the_harness_with_one_call(fast_sandbox: AsyncSandbox) -> None:
    program = Program(language="python", source="import time\ndef f(x):\n    print('hi')\n    return (x, [x])\n"
                      "def spin():\n    while True:\n        pass\n")  # fmt: skip
    out = await call_function(fast_sandbox, program, "f", [{"$t": [1, 2]}], {}, Limits())
    assert out.result.verdict is Verdict.ACCEPTED and out.value == {"$t": [{"$t": [1, 2]}, [{"$t": [1, 2]}]]}
    assert "hi" in out.result.stderr and out.result.stdout == ""  # the report channel is not shown
    spin = await call_function(fast_sandbox, program, "spin", [], {}, Limits(cpu_time=1, wall_time=5))
    assert spin.result.verdict is Verdict.TIME_LIMIT_EXCEEDED and spin.value is None
    summing = Program(language="python", source="def f():\n    return sum(range(10**7))\n")
    busy = await call_function(fast_sandbox, summing, "f", [], {}, Limits())
    assert busy.value == sum(range(10**7)) and busy.result.cpu_time > 0.05  # the candidate's CPU is counted
    missing = await call_function(fast_sandbox, program, "nope", [], {}, Limits())
    assert missing.result.verdict is Verdict.RUNTIME_ERROR and "no function named nope" in missing.result.stderr


async def test_a_solution_that_raises_as_it_loads_shows_its_traceback(fast_sandbox: AsyncSandbox) -> None:
    """The feedback of a solution whose module raised: its traceback from its own frame on, as
    Python prints it (carets included), with nothing of the harness's frames."""
    program = Program(language="python", source="def g(x):\n    return x['k'] + 1\n\nVALUE = g({})\n")
    out = await call_function(fast_sandbox, program, "g", [], {}, Limits())
    assert out.result.verdict is Verdict.RUNTIME_ERROR and out.value is None
    assert out.result.stderr.endswith(
        'Traceback (most recent call last):\n  File "/box/solution.py", line 4, in <module>\n    VALUE = g({})\n'
        "            ^^^^^\n  File \"/box/solution.py\", line 2, in g\n    return x['k'] + 1\n           ~^^^^^\n"
        "KeyError: 'k'\n"
    ), out.result.stderr
    assert "harness" not in out.result.stderr
    hostile = Program(language="python", source=(
        "class E(Exception):\n    def __setattr__(self, k, v):\n        raise RuntimeError('no')\n"
        "    def __str__(self):\n        raise RuntimeError('no text')\n\ndef g():\n    return 1\n\nraise E()\n"
    ))  # fmt: skip
    out = await call_function(fast_sandbox, hostile, "g", [], {}, Limits())
    assert out.result.verdict is Verdict.RUNTIME_ERROR and out.value is None
    assert 'File "/box/solution.py", line 10, in <module>' in out.result.stderr, out.result.stderr
    hooked = Program(language="python", source=(
        "import sys\nsys.excepthook = lambda t, v, tb: print('hooked:', v, file=sys.stderr)\n"
        "def g():\n    return 1\nraise ValueError('x')\n"
    ))  # fmt: skip
    out = await call_function(fast_sandbox, hooked, "g", [], {}, Limits())
    assert out.result.verdict is Verdict.RUNTIME_ERROR and out.result.stderr.endswith("hooked: x\n"), out.result.stderr
    for source in (
        "import sys\ndel sys.stderr\ndef g():\n    return 1\nraise ValueError('x')\n",
        "import os, sys\nsys.__excepthook__ = lambda *a: os._exit(0)\ndef g():\n    return 1\nraise ValueError('x')\n",
        "import sys\nsys.modules['io'] = None\ndef g():\n    return 1\nraise ValueError('x')\n",
        "import builtins\nbuiltins.type = None\ndef g():\n    return 1\nraise ValueError('x')\n",
    ):
        out = await call_function(fast_sandbox, Program(language="python", source=source), "g", [], {}, Limits())
        assert out.result.verdict is Verdict.RUNTIME_ERROR and out.value is None
        # (without its io module, Python's printer shows no source line: python3 prints the same)
        line = "" if "sys.modules['io']" in source else "    raise ValueError('x')\n"
        assert out.result.stderr.endswith(
            'Traceback (most recent call last):\n  File "/box/solution.py", line 5, in <module>\n'
            + line
            + "ValueError: x\n"
        ), out.result.stderr


@pytest.mark.parametrize("way", ["strict", "no forker"])
async def test_the_harness_forking_its_candidate_itself_keeps_the_same_boundary(way: str) -> None:
    """The zygote's forker forks a harness's two processes (forker.c's ``split_harness``); without
    it the trusted process forks its candidate itself: in a fresh interpreter per run (strict
    isolation: execve makes a process dumpable again, and the harness undoes it), or in a run the
    zygote forked. The candidate's process must see the same either way."""
    from tests.sandbox.conftest import SKIP_REASON

    if SKIP_REASON:
        pytest.skip(SKIP_REASON)
    options = {"isolation": "strict"} if way == "strict" else {"forker": False}
    async with AsyncSandbox(pool_size=1, **options) as sandbox:  # type: ignore[arg-type]
        grader = Grader(sandbox, GradingConfig(scan=False))
        [task] = [t for t in load_humaneval("assert") if t.id == "HumanEval/0"]
        look = probe_task("function").model_copy(update={"tests": [TestCase(args=[], expected=CLEAN, visible=True)]})
        rewards = await grader.grade_many([(task, task.reference or ""), (look, PROBE)])
        assert [r.value for r in rewards] == [1.0, 1.0], rewards[1].cases


async def test_too_few_processes_to_grade_is_a_clear_error(fast_sandbox: AsyncSandbox) -> None:
    [task] = [t for t in load_humaneval("assert") if t.id == "HumanEval/0"]
    with pytest.raises(ValueError, match="processes=2 or more"):
        await Grader(fast_sandbox, GradingConfig(limits=Limits(processes=1))).grade(task, task.reference or "")


async def test_an_exception_that_steers_control_flow_cannot_skip_asserts(fast_sandbox: AsyncSandbox) -> None:
    """A StopIteration raised inside ``map(candidate, ...)`` would end the check's loop as if its
    remaining asserts did not exist: it reaches the check as a plain error instead."""
    check = "def check(candidate):\n    for got, want in zip(map(candidate, [1, 2, 3]), [2, 4, 6]):\n" \
            "        assert got == want\n"  # fmt: skip
    task = Task(id="m", form="assert", prompt="", entry_point="double", tests=[TestCase(code=check)])
    cheat = "def double(x):\n    if x > 1:\n        raise StopIteration\n    return 2 * x\n"
    r = await Grader(fast_sandbox, GradingConfig(scan=False, mode="fraction")).grade(task, cheat)
    assert r.value is not None and r.value < 1.0


async def test_asserts_an_answer_makes_the_check_skip_count_as_failed(fast_sandbox: AsyncSandbox) -> None:
    check = "def check(candidate):\n    for x in candidate(3):\n        assert x == 1\n    assert candidate(0) == []\n"
    task = Task(id="ones", form="assert", prompt="", entry_point="ones", tests=[TestCase(code=check)])
    grader = Grader(fast_sandbox, GradingConfig(scan=False))
    honest = await grader.grade(task, "def ones(n):\n    return [1] * n\n")
    assert honest.value == 1.0 and honest.total == 4  # every assert ran: the loop's three and the last
    empty = await grader.grade(task, "def ones(n):\n    return []\n")
    assert empty.value == 0.5 and (empty.passed, empty.total) == (1, 2)  # the loop's assert never ran
    assert "never ran" in empty.cases[0].detail


# A module the candidate leaves where an import looks first (/box): imported, it says which process
# imported it. The trusted process decodes the candidate's bytes value (base64, imported then).
SHADOWING = r"""
import os
SHADOW = "import os\nos.write(2, b'shadow imported by %d\\n' % os.getpid())\nfrom binascii import *\n" \
         "def b64encode(b):\n    return b2a_base64(b, newline=False)\n" \
         "def b64decode(s, validate=False):\n    return a2b_base64(s)\n"
for name in ("base64.py", "random.py"):
    with open("/box/" + name, "w") as f:
        f.write(SHADOW)


def f():
    return [os.getpid(), b"bytes"]
"""


@pytest.mark.parametrize("isolation", ["fast", "strict"])
async def test_a_module_the_candidate_writes_is_never_imported_by_the_trusted_process(
    fast_sandbox: AsyncSandbox, isolation: str
) -> None:
    from tests.sandbox.conftest import SKIP_REASON

    if SKIP_REASON:
        pytest.skip(SKIP_REASON)
    job = function_job("f", [(0, [], {}), (1, [], {})], 0.0)
    if isolation == "fast":
        run = await run_harness(fast_sandbox, SHADOWING, job, Limits())
    else:
        async with AsyncSandbox(pool_size=1, isolation="strict") as sandbox:
            run = await run_harness(sandbox, SHADOWING, job, Limits())
    assert [decode_value(c["value"])[1] for c in run.cases] == [b"bytes", b"bytes"], run
    candidate_pid = decode_value(run.cases[0]["value"])[0]
    importers = {int(line.rsplit(" ", 1)[1]) for line in run.result.stderr.splitlines() if "shadow" in line}
    assert importers == {candidate_pid}  # the candidate's own process only


SHADOW_FILE = "import os\nos.write(2, b'shadow imported by %d\\n' % os.getpid())\n"
CALLED = "import os\n\n\ndef f():\n    return os.getpid()\n"


@pytest.mark.parametrize("isolation", ["fast", "strict"])
async def test_a_file_given_with_the_program_is_never_imported_by_the_trusted_process(
    fast_sandbox: AsyncSandbox, isolation: str
) -> None:
    """``call_function(like=program)`` puts the program's own files in /box before the trusted
    process starts: none named like a module it imports (at its top level in a fresh interpreter,
    or lazily: ctypes, random) may be what it imports."""
    from tests.sandbox.conftest import SKIP_REASON

    if SKIP_REASON:
        pytest.skip(SKIP_REASON)
    names = ("json.py", "typing.py", "ctypes.py", "random.py", "__future__.py")  # (each module imports __future__)
    files = [InputFile(path=name, content=SHADOW_FILE.encode()) for name in names]
    program = Program(language="python", source=CALLED, files=files)
    if isolation == "fast":
        outcome = await call_function(fast_sandbox, program, "f", [], {}, Limits())
    else:
        async with AsyncSandbox(pool_size=1, isolation="strict") as sandbox:
            outcome = await call_function(sandbox, program, "f", [], {}, Limits())
    assert outcome.returned, outcome.result
    candidate_pid = decode_value(outcome.value)
    importers = {int(line.rsplit(" ", 1)[1]) for line in outcome.result.stderr.splitlines() if "shadow" in line}
    assert importers <= {candidate_pid}, outcome.result.stderr  # never the trusted process


@pytest.mark.parametrize("isolation", ["fast", "strict"])
async def test_a_called_program_still_imports_its_own_files(fast_sandbox: AsyncSandbox, isolation: str) -> None:
    from tests.sandbox.conftest import SKIP_REASON

    if SKIP_REASON:
        pytest.skip(SKIP_REASON)
    files = [InputFile(path="helper.py", content=b"def g():\n    return 41\n")]
    program = Program(language="python", source="from helper import g\n\n\ndef f():\n    return g() + 1\n", files=files)
    if isolation == "fast":
        outcome = await call_function(fast_sandbox, program, "f", [], {}, Limits())
    else:
        async with AsyncSandbox(pool_size=1, isolation="strict") as sandbox:
            outcome = await call_function(sandbox, program, "f", [], {}, Limits())
    assert outcome.returned and decode_value(outcome.value) == 42, outcome.result


@pytest.mark.parametrize("compiled", ["another interpreter", "not marshal data", "none"])
async def test_checks_compiled_for_another_interpreter_are_compiled_from_their_text(
    fast_sandbox: AsyncSandbox, compiled: str
) -> None:
    """The host sends a task's checks compiled as well as as text (``compiled_checks``): a sandbox
    interpreter of another version (another cache tag), or compiled code it cannot load, compiles
    the text, with the same verdicts."""
    [task] = [t for t in load_humaneval("assert") if t.id == "HumanEval/2"]
    rewritten, context = check_program(task)
    job = assert_job("truncate_number", [src for src, _ in rewritten], 1e-6, context)
    if compiled == "another interpreter":
        job["compiled"]["tag"] = "cpython-00"
    elif compiled == "not marshal data":
        job["compiled"]["code"] = "bm90IG1hcnNoYWw="
    else:
        job["compiled"] = None
    good = await run_harness(fast_sandbox, task.reference or "", job, Limits())
    bad = await run_harness(fast_sandbox, "def truncate_number(x):\n    return 0.0\n", job, Limits())
    assert good.load == {"load": "ok"} and bad.load == {"load": "ok"}
    # (its check's 3 asserts: 2 hidden, and 1 the prompt shows, a visible test of its own)
    assert [(r["passed"], r["failed"]) for r in good.tests.values()] == [(2, 0), (1, 0)]
    assert [(r["passed"], r["failed"]) for r in bad.tests.values()] == [(0, 2), (0, 1)]
