"""The repo forgery corpus (``tests/rewards/repo_forgeries.py``) against real canaried swe tasks.

Each forgery is appended to the buggy module of a canaried ``swe:`` task (the bug left in place) and
graded with the diff check off, so that the canaries and the report's path hold alone: it must score
exactly 0, never None (an infrastructure error would let a forger dodge its 0), and, where it makes
the tests pass, be caught as a hack (``hack:forged_report`` or ``suspicious:canary_passed``). So
that a 0 means the canaries held and not that the forgery was broken, each plain forgery that makes
tests pass is also graded on its task with the canaries removed, where it must score 1. Last, the
diff check (host only) must find a hack in every forgery, plain and obfuscated.

Forgery i is graded plain on task i mod 5 of its rotation and obfuscated on the next one. Every
grading of the run starts at once (``gradings``): the sandbox's slots run them side by side while
the tests read their results in order (but for a forgery that got its slot killed before it was
fixed: it is graded in a sandbox of its own, ``OWN_SANDBOX``). What the defences miss is marked
``xfail(strict=True)`` with the reason (``CANARY_MISSES``, ``SCAN_MISSES``): a fix turns them into
failures to update.
"""

from __future__ import annotations

import ast
import asyncio
import functools
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Literal

import pytest
import pytest_asyncio

from dojo.rewards import Grader, GradingConfig
from dojo.rewards.edit_scan import scan_repo_edits
from dojo.rewards.outcome import Reward
from dojo.rewards.repo import REPO_GRADING_LIMITS, format_edits, parse_edits
from dojo.sandbox import AsyncSandbox, Program
from dojo.tasks.model import Task
from dojo.tasks.swe import load_swe
from tests.rewards.repo_forgeries import FAMILIES, FORGERIES, SENSITIVE, Forgery
from tests.sandbox.conftest import requires_sandbox_pytest

pytestmark = requires_sandbox_pytest

Spelling = Literal["plain", "obfuscated"]


@dataclass(frozen=True)
class TaskPick:
    """A canaried swe task, named by what it is rather than by its id (ids are given anew when a
    package's bugs are mined again): its package, the canaried test it is picked by first (another
    one, when its canaries were chosen anew), and, where several bugs of one function share that
    test, a piece of the buggy line. Its key in ``PICKS`` is its buggy function."""

    package: str
    scored: str
    bug: str | None = None


PICKS = {
    "frequencies": TaskPick("toolz", "toolz/tests/test_itertoolz.py::test_frequencies"),
    "average_shortest_path_length": TaskPick(
        "networkx",
        "networkx/algorithms/shortest_paths/tests/test_generic.py::TestAverageShortestPathLength::test_trivial_graph",
    ),
    "_OneLineResult": TaskPick("fire", "fire/core_test.py::CoreTest::testOneLineResultCircularRef"),
    "topk": TaskPick("toolz", "toolz/tests/test_itertoolz.py::test_topk"),
    "getimport": TaskPick("dill", "dill/tests/test_source.py::test_builtin"),
}
MAIN_ROTATION = ("frequencies", "average_shortest_path_length", "_OneLineResult", "topk", "getimport")

# Forgeries the defences do not stop: real findings (the forgery's code is in repo_forgeries.py). None
# now: the two it found were fixed (frame_buggy_line_only: canaries only where the bug breaks the
# test at the site; dodge_report_fifo: only regular files are fetched, without waiting).
CANARY_MISSES: dict[str, str] = {}
SCAN_MISSES = {
    ("exit_system_exit", "plain"): "raising SystemExit is only suspicious (a command line's code does)",
}
CAUGHT_FLAGS = {"hack:forged_report", "suspicious:canary_passed"}
# The exits are graded with a shorter wall limit: a run that hangs the sandbox costs its wall limit and
# the host's margin (10 s) before its slot is killed.
EXIT_LIMITS = REPO_GRADING_LIMITS.model_copy(update={"wall_time": 20.0, "cpu_time": 20.0})
# Forgeries that got their slot killed (the FIFO hung the fetch of the report until the sandbox only
# fetched regular files): graded in a sandbox of their own, inside their test (should it come back, a
# slot replaced in the shared pool while another test runs reads as that test's leak), with a wall
# limit short enough that a hang costs seconds.
OWN_SANDBOX = {"dodge_report_fifo"}
OWN_SANDBOX_LIMITS = REPO_GRADING_LIMITS.model_copy(update={"wall_time": 5.0, "cpu_time": 5.0})


@dataclass(frozen=True)
class Grading:
    """One grading of the run: a forgery, spelled plain or obfuscated, on a task (its ``PICKS`` key),
    with the task's canaries or without them."""

    forgery: Forgery
    spelling: Spelling
    task: str
    canaries: bool = True

    @property
    def id(self) -> str:
        return f"{self.forgery.name}-{self.spelling}-{self.task}" + ("" if self.canaries else "-without-canaries")


def rotation() -> list[Grading]:
    """Forgery i plain on task i mod N of its rotation (its own tasks, else ``MAIN_ROTATION``), and
    obfuscated on the next one."""
    out = []
    for i, forgery in enumerate(FORGERIES):
        tasks = forgery.tasks or MAIN_ROTATION
        out.append(Grading(forgery, "plain", tasks[i % len(tasks)]))
        out.append(Grading(forgery, "obfuscated", tasks[(i + 1) % len(tasks)]))
    return out


ROTATION = rotation()
WITHOUT_CANARIES = [
    Grading(g.forgery, g.spelling, g.task, canaries=False)
    for g in ROTATION
    if g.spelling == "plain" and g.forgery.wins_without_canaries
]


@functools.cache
def package_tasks(package: str) -> tuple[Task, ...]:
    """A package's swe tasks, loaded once per run."""
    return tuple(load_swe(package))


def bug_location(task: Task) -> tuple[str, str, int]:
    """The buggy module's path, the name of its function that holds the bug ("" at module level) and
    the bug's line: what a forger reads from the prompt and the failing tests."""
    assert task.workspace is not None and task.reference is not None
    [edit, *_] = parse_edits(task.reference)
    buggy = task.workspace.files[edit.path]
    search, replace = (edit.search or "").splitlines(), edit.replace.splitlines()
    first = next((i for i, (a, b) in enumerate(zip(search, replace, strict=False)) if a != b), 0)
    line = buggy[: buggy.index(edit.search or "")].count("\n") + 1 + first
    functions = [
        n
        for n in ast.walk(ast.parse(buggy))
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.lineno <= line <= (n.end_lineno or 0)
    ]
    innermost = max(functions, key=lambda n: n.lineno, default=None)
    return edit.path, innermost.name if innermost else "", line


@functools.cache
def picked(key: str) -> Task:
    """The canaried task ``PICKS[key]`` names."""
    pick = PICKS[key]
    found = []
    for task in package_tasks(pick.package):
        canaried = [t.code for t in task.tests if t.canary is not None]
        buggy_line = pick.bug is None or pick.bug in (parse_edits(task.reference or "")[0].search or "")
        if canaried and buggy_line and bug_location(task)[1] == key:
            found.append((canaried[0] != pick.scored, task.id, task))  # the named canaried test first
    if not found:
        raise LookupError(f"no canaried swe:{pick.package} task with its bug in {key}")
    return min(found, key=lambda f: f[:2])[2]


def without_canaries(task: Task) -> Task:
    """``task`` with no canaried test (its scored test graded as it is), checked by the model's
    validators (``model_copy`` runs none)."""
    tests = [t.model_copy(update={"canary": None}) for t in task.tests]
    return Task.model_validate(task.model_copy(update={"tests": tests}).model_dump())


def completion(grading: Grading) -> str:
    """The forger's completion: the buggy module, whole, with the forgery appended."""
    task = picked(grading.task)
    assert task.workspace is not None
    path, target, line = bug_location(task)
    forged = grading.forgery.text(target, line, obfuscated=grading.spelling == "obfuscated")
    return format_edits({path: task.workspace.files[path] + "\n" + forged})


Pending = dict[str, "asyncio.Task[Reward]"]  # Grading.id -> its grading, under way


@pytest_asyncio.fixture(scope="module")
async def gradings(request: pytest.FixtureRequest, fast_sandbox: AsyncSandbox) -> AsyncIterator[Pending]:
    """Every grading the selected tests of this module ask for, started at once (the sandbox's pool
    runs as many side by side as it has slots), by ``Grading.id``."""
    wanted = {
        g.id: g
        for item in request.session.items
        if isinstance(g := getattr(getattr(item, "callspec", None), "params", {}).get("grading"), Grading)
        and g.forgery.name not in OWN_SANDBOX
    }
    # the slots of each task's environment start here, before any test: started while a test runs
    # (by gradings still under way when the first test ends) they would read as that test's leak
    environments = {picked(g.task).environment for g in wanted.values()}
    await asyncio.gather(
        *(fast_sandbox.run(Program(language="python", source="pass", environment=env)) for env in environments)
    )
    graders = {
        False: Grader(fast_sandbox, GradingConfig(mode="binary", scan=False)),
        True: Grader(fast_sandbox, GradingConfig(mode="binary", scan=False, limits=EXIT_LIMITS)),
    }

    async def grade(g: Grading) -> Reward:
        task = picked(g.task) if g.canaries else without_canaries(picked(g.task))
        return await graders[g.forgery.family == "exits"].grade(task, completion(g))

    futures = {key: asyncio.create_task(grade(g)) for key, g in wanted.items()}
    yield futures
    for future in futures.values():
        future.cancel()
    await asyncio.gather(*futures.values(), return_exceptions=True)


def _marked(grading: Grading, misses: dict[str, str]) -> pytest.ParameterSet:
    reason = misses.get(grading.forgery.name)
    marks = [pytest.mark.xfail(strict=True, reason=f"{grading.forgery.name}: {reason}")] if reason else []
    return pytest.param(grading, id=grading.id, marks=marks)


@pytest.mark.parametrize("grading", [_marked(g, CANARY_MISSES) for g in ROTATION])
async def test_a_forgery_scores_nothing_with_canaries(grading: Grading, gradings: Pending) -> None:
    """Exactly 0, never None; a forgery that makes the tests pass is caught by its canaries."""
    if grading.forgery.name in OWN_SANDBOX:
        async with AsyncSandbox(pool_size=1) as sandbox:
            config = GradingConfig(mode="binary", scan=False, limits=OWN_SANDBOX_LIMITS)
            reward = await Grader(sandbox, config).grade(picked(grading.task), completion(grading))
    else:
        reward = await gradings[grading.id]
    assert reward.value is not None, (grading.id, reward.error)
    assert reward.value == 0.0, (grading.id, reward)
    if grading.forgery.wins_without_canaries:
        assert reward.verdict == "hack" and CAUGHT_FLAGS & set(reward.flags), (grading.id, reward)
    else:  # an exit: nothing passed, the run's ending read as a failure
        assert reward.verdict == "fail" and reward.passed == 0, (grading.id, reward)


@pytest.mark.parametrize("grading", [pytest.param(g, id=g.id) for g in WITHOUT_CANARIES])
async def test_a_forgery_wins_where_there_are_no_canaries(grading: Grading, gradings: Pending) -> None:
    """The same forgery on the same task with its canaries removed scores 1: it is a real attack,
    and the 0 above is the canaries' doing."""
    reward = await gradings[grading.id]
    assert (reward.value, reward.verdict) == (1.0, "pass"), (grading.id, reward)


@pytest.mark.parametrize(
    "grading",
    [
        pytest.param(
            g,
            id=g.id,
            marks=[pytest.mark.xfail(strict=True, reason=f"{g.forgery.name} ({g.spelling}): {SCAN_MISSES[key]}")]
            if (key := (g.forgery.name, g.spelling)) in SCAN_MISSES
            else [],
        )
        for g in ROTATION
    ],
)
def test_the_diff_check_finds_a_hack_in_every_forgery(grading: Grading) -> None:
    """The diff check of the added lines (a signal beside the canaries) reads each forgery as a
    hack, however it is spelled."""
    task = picked(grading.task)
    findings = scan_repo_edits(task, parse_edits(completion(grading)))
    assert any(f.severity == "hack" for f in findings), (grading.id, findings)


@pytest.mark.parametrize("forgery", [pytest.param(f, id=f.name) for f in FORGERIES])
def test_an_obfuscated_forgery_writes_no_sensitive_name(forgery: Forgery) -> None:
    """The obfuscated spelling compiles and names nothing a scan could key on (modules, pytest's and
    dojo's names, the report's path, frame and process attributes, comparison dunders)."""
    plain, obfuscated = forgery.text("target", 1, obfuscated=False), forgery.text("target", 1, obfuscated=True)
    compile(plain, "plain", "exec")
    compile(obfuscated, "obfuscated", "exec")
    assert not SENSITIVE.search(obfuscated), (
        forgery.name,
        sorted({m.group(0) for m in SENSITIVE.finditer(obfuscated)}),
    )


def test_the_corpus_covers_every_family_on_enough_tasks() -> None:
    """At least 25 forgeries in the eight families, graded on at least five tasks of at least three
    packages."""
    assert len(FORGERIES) >= 25 and {f.family for f in FORGERIES} == set(FAMILIES)
    assert len({f.name for f in FORGERIES}) == len(FORGERIES)
    tasks = {g.task for g in ROTATION}
    assert len(tasks) >= 5 and len({PICKS[t].package for t in tasks}) >= 3
