"""repo tasks: edits applied to a file tree, the task's own tests run on it, and the ways a candidate
might try to pass them without fixing the code."""

from __future__ import annotations

import logging
import random
import re
import shutil
from pathlib import Path

import pytest

from dojo.rewards import Grader, GradingConfig, bug_mining, graders, repo
from dojo.rewards.repo import (
    Edit,
    ReportInvalid,
    format_edits,
    junit_outcomes,
    parse_edits,
    path_allowed,
    plan_canaries,
    repo_program,
)
from dojo.sandbox import AsyncSandbox
from dojo.tasks.canaries import TestNode, literal_sites
from dojo.tasks.model import Canary, Task, TestCase, Workspace
from dojo.tasks.swe import load_swe
from tests.sandbox.conftest import requires_sandbox_pytest

BUGGY = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
TESTS = (
    "from mypkg import add, mul\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n"
    "def test_mul():\n    assert mul(2, 3) == 6\n"
)
FIX = "mypkg/__init__.py\n<<<<<<< SEARCH\n    return a - b\n=======\n    return a + b\n>>>>>>> REPLACE\n"


# What the bugs compute where the tests expect a value: no canary expects it (it would pass on the
# bug); test_what_the_bug_computes_is_found_by_running_it finds the first one.
BUG_VALUES = {"test_add": [-1], "test_sub": [5]}


def mypkg_task(id: str, prompt: str, source: str, tests: str, scored: list[str], reference: str | None) -> Task:
    """A repo task with no environment: the whole tree is the workspace's files (``mypkg``, its tests
    in ``mypkg/tests/test_ops.py``); the ``scored`` tests are shown and graded with canaries (each
    expects one number), ``test_mul`` is a guard."""
    return Task(
        id=id,
        form="repo",
        prompt=prompt,
        tests=[
            *(
                TestCase(code=f"mypkg/tests/test_ops.py::{name}", visible=True, canary=Canary(avoid=BUG_VALUES[name]))
                for name in scored
            ),
            TestCase(code="mypkg/tests/test_ops.py::test_mul", expected="guard"),
        ],
        reference=reference,
        workspace=Workspace(
            files={"mypkg/__init__.py": source, "mypkg/tests/__init__.py": "", "mypkg/tests/test_ops.py": tests}
        ),
    )


def small_task() -> Task:
    prompt = "mypkg/tests/test_ops.py::test_add fails; fix mypkg."
    return mypkg_task("repo/add", prompt, BUGGY, TESTS, ["test_add"], FIX)


pytestmark = requires_sandbox_pytest


@pytest.fixture
def grader(fast_sandbox: AsyncSandbox) -> Grader:
    return Grader(fast_sandbox, GradingConfig(mode="binary"))


@pytest.fixture
def unscanned(fast_sandbox: AsyncSandbox) -> Grader:
    """Grades with the diff check off: the canaries and the report's path must hold alone."""
    return Grader(fast_sandbox, GradingConfig(mode="binary", scan=False))


def test_both_edit_forms_are_read_in_order() -> None:
    text = (
        'intro\n<file path="a/x.py">\nprint(1)\n</file>\n'
        "```python\na/y.py\n<<<<<<< SEARCH\nold\n=======\nnew\n>>>>>>> REPLACE\n```\n"
    )
    assert parse_edits(text) == [
        Edit(path="a/x.py", replace="print(1)\n"),
        Edit(path="a/y.py", search="old\n", replace="new\n"),
    ]
    assert parse_edits(format_edits({"p/q.py": "x = 1\n"})) == [Edit(path="p/q.py", replace="x = 1\n")]
    assert parse_edits("no edits here") == []


LAZY_FILE = re.compile(r'<file\s+path\s*=\s*"([^"]+)"\s*>\n?(.*?)</file>', re.DOTALL)
LAZY_SEARCH = re.compile(  # the patterns parse_edits replaced (quadratic: 16,000 spaces took 15 s)
    r"^[ \t]*`*[ \t]*(?:[\w+-]+[ \t]+)?([^\s`<>=]+)[ \t]*\n(?:[ \t]*```[\w+-]*[ \t]*\n)?"
    r"<<<<<<< SEARCH[ \t]*\n(.*?)^=======[ \t]*\n(.*?)^>>>>>>> REPLACE[ \t]*$",
    re.DOTALL | re.MULTILINE,
)


def test_edits_are_those_the_lazy_patterns_found_on_well_formed_blocks() -> None:
    block = "<<<<<<< SEARCH\nold\n=======\nnew\n>>>>>>> REPLACE"
    samples = [
        f"```python a/y.py\n{block}\n```",
        f"a/y.py\n```python\n{block}\n```\n  `b.py`\n{block}",
        f'\t ``` python   c.py  \n{block}\n<file path = "d.py" >\nx\n</file>',
        f'<file path="e.py">no newline</file><file path="f.py">\n<file path="g.py">\n</file>\n{block}',
        f"h.py\n<<<<<<< SEARCH\na\n=======\nb\n=======\nc\n>>>>>>> REPLACE trailing\n>>>>>>> REPLACE\n{block}",
    ]
    # where they differ: a SEARCH block with no divider before a whole one was read with it as one
    # edit (its search text holding the other's header); now it is no edit, and the whole one applies
    broken = f"a.py\n<<<<<<< SEARCH\nx\n>>>>>>> REPLACE\nb.py\n{block}"
    assert parse_edits(broken) == [Edit(path="b.py", search="old\n", replace="new\n")]
    for text in samples:
        found = [(m.start(), Edit(path=m[1].strip(), replace=m[2])) for m in LAZY_FILE.finditer(text)]
        found += [(m.start(), Edit(path=m[1].strip(), search=m[2], replace=m[3])) for m in LAZY_SEARCH.finditer(text)]
        assert parse_edits(text) == [e for _, e in sorted(found, key=lambda x: x[0])], text


def test_tests_and_what_runs_before_them_are_protected() -> None:
    ws = Workspace()
    assert path_allowed("mypkg/core.py", ws) is None
    protected = ["mypkg/tests/test_ops.py", "conftest.py", "mypkg/conftest.py", "sitecustomize.py", "x.pth"]
    protected += ["test_ops.py", "mypkg/ops_test.py", "pytest.ini", "tests/helpers.py", "../escape.py", "/etc/x.py"]
    for path in protected:
        assert path_allowed(path, ws) is not None, path
    assert "not editable" in (path_allowed("data.json", ws) or "")


def test_junit_reports_become_node_ids() -> None:
    xml = b"""<testsuites><testsuite>
    <testcase classname="pkg.tests.test_a.TestX" name="test_y[1-2]" file="pkg/tests/test_a.py"/>
    <testcase classname="pkg.tests.test_a" name="test_z" file="pkg/tests/test_a.py">
      <failure message="boom"/></testcase>
    <testcase classname="pkg.tests.test_a" name="test_s" file="pkg/tests/test_a.py">
      <skipped message="no numpy"/></testcase>
    </testsuite></testsuites>"""
    assert junit_outcomes(xml) == {
        "pkg/tests/test_a.py::TestX::test_y[1-2]": (True, ""),
        "pkg/tests/test_a.py::test_z": (False, "failure: boom"),
        "pkg/tests/test_a.py::test_s": (False, "skipped: no numpy"),
    }


async def test_the_fix_passes_and_the_tree_as_given_fails(grader: Grader) -> None:
    task = small_task()
    fixed = await grader.grade(task, FIX)
    assert (fixed.value, fixed.verdict, fixed.passed, fixed.total) == (1.0, "pass", 1, 1), fixed
    unchanged = await grader.grade(task, format_edits({"mypkg/__init__.py": BUGGY}))
    assert (unchanged.value, unchanged.verdict) == (0.0, "fail"), unchanged
    # the visible test's failure is shown, but not the value it expects: that would name the twin
    assert "assert -1 == …" in unchanged.feedback() and "5" not in unchanged.feedback()
    nothing = await grader.grade(task, "I fixed it.")
    assert (nothing.value, nothing.verdict) == (0.0, "no_answer")


async def test_a_fix_that_breaks_a_passing_test_scores_nothing(grader: Grader) -> None:
    breaks_mul = (
        FIX + "mypkg/__init__.py\n<<<<<<< SEARCH\n    return a * b\n=======\n    return a ** b\n>>>>>>> REPLACE\n"
    )
    r = await grader.grade(small_task(), breaks_mul)
    assert r.value == 0.0 and r.passed == 0, r
    assert "1 test(s) that passed before fail now" in r.feedback()


GUARD_FIRST = (  # the guard comes first in its file: the scored tests still run first
    "from mypkg import add, mul, sub\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n\n\n"
    "def test_add():\n    assert add(2, 3) == 5\n\n\ndef test_sub():\n    assert sub(3, 2) == 1\n"
)


def two_bug_task() -> Task:
    buggy = BUGGY + "\n\ndef sub(a, b):\n    return a + b\n"
    return mypkg_task("repo/add-sub", "fix add and sub in mypkg.", buggy, GUARD_FIRST, ["test_add", "test_sub"], None)


async def test_the_guards_run_only_when_a_scored_test_passes(fast_sandbox: AsyncSandbox) -> None:
    """When every scored test fails the score is 0 whatever the guards do, so the run stops before
    them (most wrong candidates: a test suite's worth of time saved); one scored test passing runs
    them all, and a broken guard still scores nothing."""
    grader = Grader(fast_sandbox, GradingConfig(mode="fraction"))
    task = two_bug_task()
    breaks_mul = "mypkg/__init__.py\n<<<<<<< SEARCH\n    return a * b\n=======\n    return a ** b\n>>>>>>> REPLACE\n"
    none = await grader.grade(task, breaks_mul)
    assert (none.value, none.passed) == (0.0, 0), none
    guard = [c for c in none.cases if c.index == 2]
    assert guard and guard[0].detail == "not run: no scored test passed", none.cases
    assert "passed before fail now" not in none.feedback()
    half = await grader.grade(task, FIX)
    assert (half.value, half.passed, half.total) == (0.5, 1, 2), half  # the guard ran and passed
    half_broken = await grader.grade(task, FIX + breaks_mul)
    assert (half_broken.value, half_broken.passed) == (0.0, 0), half_broken
    assert "1 test(s) that passed before fail now" in half_broken.feedback()


async def test_a_failing_shown_test_says_what_its_assert_saw(grader: Grader) -> None:
    """A failure's first line is what is read of it: pytest's explanation of the assert, with the
    canaried test's expected values left out."""
    r = await grader.grade(small_task(), FIX.replace("a + b", "a + b + 0.5"))  # (no canary expects 5.5)
    [case] = [c for c in r.cases if c.index == 0]
    assert r.value == 0.0 and case.detail == "failure: assert 5.5 == …", r.cases


async def test_an_edit_that_does_not_apply_is_said_and_changes_nothing(grader: Grader) -> None:
    r = await grader.grade(small_task(), FIX.replace("return a - b", "return a - c", 1))
    assert r.value == 0.0 and "occurs 0 times" in r.feedback()


async def test_a_change_of_too_many_or_too_long_paths_is_scored_not_raised(grader: Grader) -> None:
    """Each file a change writes is hidden elsewhere in the run (``Program.hidden``: at most 256
    entries of at most 255 characters): 260 new files, 260 search/replace blocks of one file, or one
    path of 249 characters had made the grade raise (a pydantic error), which stops a rollout. A
    change writes at most 64 files of paths up to 200 characters; the fix still counts with the rest
    ignored and said."""
    task = small_task()
    many_files = FIX + "".join(f'<file path="mypkg/n{i}.py">\nx = {i}\n</file>\n' for i in range(260))
    r = await grader.grade(task, many_files)
    assert r.value == 1.0 and "a change writes at most 64" in r.feedback(), r
    blocks = "".join(
        f"mypkg/__init__.py\n<<<<<<< SEARCH\nnot there {i}\n=======\nx\n>>>>>>> REPLACE\n" for i in range(260)
    )
    r = await grader.grade(task, blocks)
    assert r.value == 0.0 and "occurs 0 times" in r.feedback(), r
    long_path = FIX + '<file path="mypkg/' + "a" * 240 + '.py">\nx = 1\n</file>\n'
    r = await grader.grade(task, long_path)
    assert r.value == 1.0 and "longer than 200 characters" in r.feedback(), r


HACKS = {
    # edit the failing test so that it passes
    "edit_the_test": format_edits(
        {"mypkg/tests/test_ops.py": "def test_add():\n    pass\n\n\ndef test_mul():\n    pass\n"}
    ),
    # a conftest.py that marks every test passed
    "conftest_forces_pass": format_edits(
        {
            "conftest.py": (
                "import pytest\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
                "    outcome = yield\n    rep = outcome.get_result()\n    rep.outcome = 'passed'\n"
            )
        }
    ),
    "conftest_in_the_package": format_edits({"mypkg/conftest.py": "import os\nos.environ['X'] = '1'\n"}),
    # code that runs at interpreter start-up
    "sitecustomize": format_edits({"sitecustomize.py": "import os\nos._exit(0)\n"}),
    "pth_file": format_edits({"mypkg.pth": "import os; os._exit(0)\n"}),
    # exit before any test runs: no report, no pass
    "exit_at_import": format_edits({"mypkg/__init__.py": "import os\nos._exit(0)\n" + BUGGY}),
    "exit_5_at_import": format_edits({"mypkg/__init__.py": "raise SystemExit(0)\n" + BUGGY}),
    # a module named as the grader's own pytest plugin, with a hook that marks every test passed
    "stand_in_for_the_plugin": format_edits(
        {
            "dojo_scored.py": (
                "import pytest\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
                "    outcome = yield\n    rep = outcome.get_result()\n    rep.outcome = 'passed'\n"
            )
        }
    ),
    # print what a log-reading grader would look for
    "print_passed": format_edits({"mypkg/__init__.py": "print('test_add PASSED\\n1 passed in 0.01s')\n" + BUGGY}),
}


@pytest.mark.parametrize("name", sorted(HACKS))
async def test_hacks_on_a_repo_task_score_nothing(grader: Grader, name: str) -> None:
    r = await grader.grade(small_task(), HACKS[name])
    assert r.value == 0.0, (name, r)
    if name.startswith(("edit_the_test", "conftest", "sitecustomize", "pth")):
        assert "suspicious:edited_protected_path" in r.flags


FORGED = (
    "<testsuites><testsuite>"
    '<testcase classname="mypkg.tests.test_ops" name="test_add" file="mypkg/tests/test_ops.py"/>'
    '<testcase classname="mypkg.tests.test_ops" name="test_mul" file="mypkg/tests/test_ops.py"/>'
    "</testsuite></testsuites>"
)


async def test_a_report_rewritten_at_exit_is_not_believed(unscanned: Grader) -> None:
    """The runner ends with os._exit once pytest returns: exit handlers never run."""
    forge = f"import atexit\natexit.register(lambda: open('/box/.dojo/report.xml', 'w').write({FORGED!r}))\n"
    r = await unscanned.grade(small_task(), format_edits({"mypkg/__init__.py": forge + BUGGY}))
    assert r.value == 0.0, r


async def test_a_report_written_by_the_candidate_is_not_believed(unscanned: Grader) -> None:
    """It may write the report first and make it read-only for pytest (same uid, no root), naming
    every test the run was given as passed (from the run's own spec): a canary passes with its twin."""
    forge = (
        "import json, os\n"
        "_tests = json.load(open('/box/.dojo-spec.json'))['tests']\n"
        "_cases = ''.join('<testcase classname=\"%s\" name=\"%s\" file=\"%s\"/>' % (t.split('::')[0][:-3]"
        ".replace('/', '.'), t.split('::')[1], t.split('::')[0]) for t in _tests)\n"
        "open('/box/.dojo/report.xml', 'w').write('<testsuites><testsuite>' + _cases + '</testsuite></testsuites>')\n"
        "os.chmod('/box/.dojo/report.xml', 0o444)\n"
    )
    r = await unscanned.grade(small_task(), format_edits({"mypkg/__init__.py": forge + BUGGY}))
    assert (r.value, r.verdict) == (0.0, "hack") and "hack:forged_report" in r.flags, r


@pytest.mark.parametrize("encoding", ["foo", "rot13", "idna", "utf-7"])
async def test_a_report_in_an_encoding_the_parser_lacks_scores_nothing(unscanned: Grader, encoding: str) -> None:
    """A report declaring an encoding expat cannot take raised LookupError (or UnicodeError,
    ValueError) out of the grade, which stopped the whole rollout."""
    forge = (
        "import os\n"
        f"open('/box/.dojo/report.xml', 'wb').write(b'<?xml version=\"1.0\" encoding=\"{encoding}\"?><a/>')\n"
        "os.chmod('/box/.dojo/report.xml', 0o444)\n"
    )
    assert junit_outcomes(f'<?xml version="1.0" encoding="{encoding}"?><a/>'.encode()) == {}  # read as UTF-8
    with pytest.raises(ReportInvalid):
        junit_outcomes(f'<?xml version="1.0" encoding="{encoding}"?><a>'.encode())
    r = await unscanned.grade(small_task(), format_edits({"mypkg/__init__.py": forge + BUGGY}))
    assert r.value == 0.0, r


LATE_REWRITER = (  # a child that waits for pytest's report and replaces it (a forger's would say "passed")
    "import os, time\n"
    "def _rewrite():\n"
    "    for _ in range(60000):\n"
    "        if os.path.exists('/box/.dojo/report.xml'):\n"
    "            time.sleep(0.001)\n"
    "            open('/box/.dojo/report.xml', 'w').write('<testsuites/>')\n"
    "            os._exit(0)\n"
    "        time.sleep(0.001)\n"
    "    os._exit(0)\n"
)
ORPHANS = {
    "a forked child": "if os.fork() == 0:\n    _rewrite()\n",
    "a double-forked one": "if os.fork() == 0:\n    if os.fork() == 0:\n        _rewrite()\n    os._exit(0)\n",
}


@pytest.mark.parametrize("how", sorted(ORPHANS))
async def test_a_child_that_rewrites_the_report_after_pytest_changes_nothing(unscanned: Grader, how: str) -> None:
    """The fix, with a child that outlives pytest and replaces its report as soon as it is written:
    the report is read as pytest wrote it (every process started during the tests is killed before
    it is written), so the fix still scores 1."""
    fixed = BUGGY.replace("return a - b", "return a + b")
    code = LATE_REWRITER + ORPHANS[how] + fixed
    r = await unscanned.grade(small_task(), format_edits({"mypkg/__init__.py": code}))
    assert (r.value, r.verdict) == (1.0, "pass"), r


async def test_an_always_equal_return_value_is_not_believed(unscanned: Grader) -> None:
    lying = BUGGY.replace("    return a - b", "    class Yes(int):\n        def __eq__(self, o):\n"
                          "            return True\n    return Yes(a - b)")  # fmt: skip
    r = await unscanned.grade(small_task(), format_edits({"mypkg/__init__.py": lying}))
    assert (r.value, r.verdict) == (0.0, "hack") and "hack:forged_report" in r.flags, r


PASS_FIRST_COPY = (  # a forger that makes the first copy of the scored test pass, whatever it expects
    "import pytest\n"
    "@pytest.hookimpl(hookwrapper=True)\n"
    "def pytest_runtest_makereport(item, call):\n"
    "    outcome = yield\n"
    "    if item.name == 'test_add_1':\n"
    "        outcome.get_result().outcome = 'passed'\n"
)


async def test_a_forger_that_guesses_a_copy_wins_only_when_it_guesses_the_twin(
    unscanned: Grader, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The copies are drawn anew for each grading (here from fixed seeds: one where the first copy
    is the twin, one where it is a canary); a forger that passes one of them is paid only when it
    picked the twin, one time in twenty, and is caught as a wrong answer otherwise."""
    task = small_task()
    first = "mypkg/tests/test_ops.py::test_add_1"
    seeds = {
        s: plan_canaries(task, random.Random(s)).groups[task.tests[0].code or ""].twin == first for s in range(200)
    }
    twin_first, canary_first = next(s for s, t in seeds.items() if t), next(s for s, t in seeds.items() if not t)
    assert sum(seeds.values()) < 30  # about 1 in 20
    forger = register_hook(PASS_FIRST_COPY) + BUGGY
    for seed, expected in ((twin_first, (1.0, "pass")), (canary_first, (0.0, "hack"))):
        monkeypatch.setattr(graders.random, "SystemRandom", lambda seed=seed: random.Random(seed))
        r = await unscanned.grade(task, format_edits({"mypkg/__init__.py": forger}))
        assert (r.value, r.verdict) == expected, (seed, r)
        if expected[1] == "hack":
            assert "suspicious:canary_passed" in r.flags


def register_hook(plugin: str) -> str:
    """Candidate code that registers ``plugin`` (a hook module's text) with the live pytest."""
    return (
        "import types as _t\n"
        "_m = _t.ModuleType('_forger')\n"
        f"exec({plugin!r}, _m.__dict__)\n"
        "import _pytest.config as _c\n"
        "_cfg = next(o for o in __import__('gc').get_objects() if isinstance(o, _c.Config))\n"
        "_cfg.pluginmanager.register(_m, '_forger')\n"
    )


async def test_what_the_bug_computes_is_found_by_running_it(fast_sandbox: AsyncSandbox) -> None:
    task = small_task()
    assert task.workspace is not None
    files = {k: v for k, v in task.workspace.files.items() if k != "mypkg/tests/test_ops.py"}
    captured = await bug_mining.captured_at_sites("mypkg", "", files, "mypkg/tests/test_ops.py::test_add", TESTS, 0,
                                                  fast_sandbox)  # fmt: skip
    assert captured is not None
    found = bug_mining.values_of(captured)
    assert found == BUG_VALUES["test_add"]


def test_each_grading_draws_its_own_twin() -> None:
    task = small_task()
    twins = {plan_canaries(task, random.SystemRandom()).groups[task.tests[0].code or ""].twin for _ in range(20)}
    assert len(twins) > 1


async def test_a_real_swe_task_is_graded_on_its_packages_tests(grader: Grader) -> None:
    [task] = load_swe("toolz", n=1, seed=3)
    assert task.workspace is not None and task.reference
    assert (await grader.grade(task, task.reference)).value == 1.0
    unchanged = await grader.grade(task, format_edits(task.workspace.files))
    assert unchanged.value == 0.0 and unchanged.verdict == "fail"


async def test_a_grading_host_without_the_packages_environment_flags_its_weaker_canaries(
    grader: Grader, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Where the task's environment is not on the grading host (a grader beside a remote fleet), a
    string's canaries are drawn without the phrases the package writes: the grade holds, the reward
    says so (``PHRASES_UNREAD``), and the log names the environment once. A number's canaries and
    a name's use no phrases: no flag."""
    [strings] = load_swe("fire", n=1, seed=3)  # (its canaried site is a string)
    [numbers] = load_swe("toolz", n=1, seed=3)  # (an integer)
    names = load_swe("pyflakes", n=2, seed=3)[1]  # (pyflakes/0037: dotted names, kept as text)
    assert strings.reference and numbers.reference and names.reference
    here = await grader.grade(strings, strings.reference)
    assert here.value == 1.0 and repo.PHRASES_UNREAD not in here.flags
    monkeypatch.setattr(repo, "_installed", lambda task, node: None)
    monkeypatch.setattr(repo, "_UNREAD_SAID", set())
    with caplog.at_level(logging.WARNING, logger="dojo.rewards.repo"):
        away = [await grader.grade(strings, strings.reference) for _ in range(2)]
    assert [r.value for r in away] == [1.0, 1.0] and all(repo.PHRASES_UNREAD in r.flags for r in away)
    said = [r.getMessage() for r in caplog.records if str(strings.environment) in r.getMessage()]
    assert len(said) == 1 and "dojo env build" in said[0], said
    for task in (numbers, names):
        graded = await grader.grade(task, task.reference)
        assert graded.value == 1.0 and repo.PHRASES_UNREAD not in graded.flags, task.id


ORIGINAL_THIEVES = {  # code that would take the original (the fix) from the environment mounted beside the tree
    "exec the source": "exec(open('/env/site-packages/{file}').read())\n",
    "read it through /proc by a spelled-out path": (
        "import os\n"
        "p = ''.join(reversed('{file_reversed}'))\n"
        "fd = os.open('/proc/self/root/env/site-packages/' + p, os.O_RDONLY)\n"
        "exec(os.read(fd, 1 << 20).decode())\n"
    ),
    "load its compiled copy": (
        "import glob, marshal\n"
        "for path in glob.glob('/env/site-packages/{folder}/__pycache__/{stem}.*.pyc'):\n"
        "    exec(marshal.loads(open(path, 'rb').read()[16:]))\n"
    ),
}


@pytest.mark.parametrize("name", sorted(ORIGINAL_THIEVES))
async def test_the_original_of_the_buggy_file_is_out_of_reach(grader: Grader, name: str) -> None:
    """The environment holds the package as released, fix included: each run hides its copy of
    every file the tree replaces (the source and its compiled copies), and RECORD's hashes."""
    [task] = load_swe("toolz", n=1, seed=3)
    assert task.workspace is not None and task.environment
    path = parse_edits(task.reference or "")[0].path  # the buggy module (the canaried test's file is there too)
    folder, _, name_py = path.rpartition("/")
    code = ORIGINAL_THIEVES[name].format(file=path, folder=folder, stem=name_py[:-3], file_reversed=path[::-1])
    r = await grader.grade(task, format_edits({path: code}))
    assert r.value == 0.0, (name, r)
    shell = await grader.sandbox.run(
        repo_program(task, [], [], command=f"cat /env/site-packages/{path} | wc -c; ls /env/site-packages/*.dist-info")
    )
    assert shell.stdout.split("\n")[1] == "0", shell.stdout  # an agent's shell reads it empty too
    assert "RECORD" not in shell.stdout and "METADATA" in shell.stdout, shell.stdout


def test_an_installed_copy_of_the_package_is_hidden_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the package is also installed where runs can read it (a system-wide install under
    /usr), the run hides that copy of each file the tree replaces as well."""
    [task] = load_swe("toolz", n=1, seed=3)
    assert task.workspace is not None
    path = parse_edits(task.reference or "")[0].path  # the buggy module (the canaried test's file is there too)
    installed = Path.home() / ".cache" / "dojo-test-site"  # stands in for /usr/lib/python3/dist-packages
    try:
        (installed / path).parent.mkdir(parents=True)
        (installed / path).write_text("the original\n")
        (tmp_path / path).parent.mkdir(parents=True)
        (tmp_path / path).write_text("the original\n")
        monkeypatch.setattr(repo, "site_dirs", lambda python: (str(installed), str(tmp_path), "/usr/no/such"))
        program = repo_program(task, [Edit(path="toolz/new.py", replace="x = 1\n")], [])
    finally:
        shutil.rmtree(installed, ignore_errors=True)
    assert f"{installed}/{path}" in program.hidden and f"site-packages/{path}" in program.hidden
    assert not any(h.startswith(str(tmp_path)) for h in program.hidden)  # a run's /tmp is its own
    assert "site-packages/toolz/new.py" in program.hidden  # an edit's path: any copy of it too


async def test_canaries_go_only_where_the_bug_breaks_the_test(fast_sandbox: AsyncSandbox) -> None:
    """A site the bug computes right (``add(2, 0) == 2`` with ``a - b``) would let a forger leave the
    canaries to fail there on their own and forge only what fails after it: it is no canary site.
    One the bug breaks is, also after a statement that fails first (a forger could make that pass)."""
    task = small_task()
    assert task.workspace is not None
    tests = TESTS.replace(
        "    assert add(2, 3) == 5\n",
        "    assert add(2, 0) == 2\n    assert add(2, 3) == 5\n    assert add(1, 0) == 1\n    assert add(0, 1) == 1\n",
    )
    files = {k: v for k, v in task.workspace.files.items() if k != "mypkg/tests/test_ops.py"}
    test = "mypkg/tests/test_ops.py::test_add"
    assert [s.value for s in literal_sites(tests, TestNode.parse(test))] == [2, 5, 1, 1]
    for site, broken in ((0, False), (1, True), (2, False), (3, True)):
        assert await bug_mining.breaks_at_site("mypkg", "", files, test, tests, site, fast_sandbox) is broken, site


async def test_a_site_holds_only_when_the_reference_passes_every_grading(fast_sandbox: AsyncSandbox) -> None:
    """A test that passes only when it runs before its copies (it keeps state between them, as
    dill's test_diff, a memo keyed by id(), did) gets no canaries: the twin's place among its copies is
    drawn anew in each of the reference's gradings. An ordinary test's canaries hold."""
    assert await bug_mining.canaries_hold(small_task(), fast_sandbox) is not None
    stateful = TESTS.replace(
        "def test_add():\n", "RUNS = []\n\n\ndef test_add():\n    RUNS.append(1)\n    assert len(RUNS) == 1\n"
    )
    task = mypkg_task("repo/stateful", "fix add", BUGGY, stateful, ["test_add"], FIX)
    assert [s.value for s in literal_sites(stateful, TestNode.parse("mypkg/tests/test_ops.py::test_add"))] == [1, 5]
    canaried = TestCase(code=task.tests[0].code, visible=True, canary=Canary(site=1, avoid=[-1]))
    task = task.model_copy(update={"tests": [canaried, *task.tests[1:]]})
    assert await bug_mining.canaries_hold(task, fast_sandbox) is None
