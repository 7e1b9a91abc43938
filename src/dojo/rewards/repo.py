"""Grading a ``repo`` task: the candidate's edits applied to the task's file tree, the hidden tests
(pytest node ids) run on it in the sandbox, each test's outcome read from pytest's JUnit report.

A candidate's edits are text, in either form (several blocks may follow each other):

    <file path="toolz/itertoolz.py">
    ...the whole new file...
    </file>

    toolz/itertoolz.py
    <<<<<<< SEARCH
    ...lines exactly as they are...
    =======
    ...what replaces them...
    >>>>>>> REPLACE

The paths are checked here: an edit of a path the workspace does not let a candidate change (its
tests, ``conftest.py``, ``*.pth``, ...) is dropped and flagged, so the tests that grade it are always
the task's own. The edits are applied in the sandbox by a driver (``REPO_DRIVER``) before any of the
candidate's code runs: it builds the tree (the environment's packages as symlinks, the workspace's
files, then the edits), and only then execs pytest. What pytest reports comes from the process
that imports the candidate's code: docs/threat-model.md says what that means.
"""

from __future__ import annotations

import fnmatch
import functools
import json
import os
import random
import re
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass

from dojo.rewards.outcome import CaseOutcome
from dojo.sandbox import InputFile, Limits, Program, SandboxAPI, Verdict
from dojo.sandbox.environment import EnvironmentStore
from dojo.sandbox.languages import default_python
from dojo.sandbox.program import in_scratch
from dojo.sandbox.runtime import site_dirs
from dojo.tasks.canaries import CanaryGroup, TestNode, canary_group
from dojo.tasks.model import TEST_RUNNER, Task, Workspace

REPO_GRADING_LIMITS = Limits(wall_time=120.0, cpu_time=120.0, memory=1 << 30, processes=64, disk=256 << 20)
REPORT = ".dojo/report.xml"
FILE_BLOCK = re.compile(r'<file\s+path\s*=\s*"([^"]+)"\s*>\n?(.*?)</file>', re.DOTALL)
SEARCH_BLOCK = re.compile(
    r"^[ \t]*`*[ \t]*(?:[\w+-]+[ \t]+)?([^\s`<>=]+)[ \t]*\n"  # the path line (possibly a fence ```python path)
    r"(?:[ \t]*```[\w+-]*[ \t]*\n)?"  # or a fence on its own line after the path
    r"<<<<<<< SEARCH[ \t]*\n(.*?)^=======[ \t]*\n(.*?)^>>>>>>> REPLACE[ \t]*$",
    re.DOTALL | re.MULTILINE,
)


@dataclass(frozen=True)
class Edit:
    """One change to one file: a whole new text (``search`` None), or ``search`` replaced by
    ``replace`` where it occurs exactly once."""

    path: str
    replace: str
    search: str | None = None


def parse_edits(completion: str) -> list[Edit]:
    """The edits a completion makes, in order (file blocks and search/replace blocks)."""
    found: list[tuple[int, Edit]] = []
    for m in FILE_BLOCK.finditer(completion):
        found.append((m.start(), Edit(path=m.group(1).strip(), replace=m.group(2))))
    for m in SEARCH_BLOCK.finditer(completion):
        found.append((m.start(), Edit(path=m.group(1).strip(), search=m.group(2), replace=m.group(3))))
    return [e for _, e in sorted(found, key=lambda item: item[0])]


def format_edits(files: dict[str, str]) -> str:
    """Whole files as a completion (what an agent's edits submit)."""
    return "\n".join(f'<file path="{path}">\n{text}</file>' for path, text in files.items())


def path_allowed(path: str, workspace: Workspace) -> str | None:
    """None when a candidate may change ``path``; else why not."""
    parts = path.split("/")
    if not path or path.startswith("/") or any(p in ("", ".", "..") for p in parts):
        return f"{path!r} is not a relative path inside the tree"
    for pattern in workspace.protected:
        if fnmatch.fnmatch(path, pattern):
            return f"{path} is protected ({pattern}): the task's tests and what runs before them are its own"
    if not any(fnmatch.fnmatch(path, pattern) for pattern in workspace.editable):
        return f"{path} is not editable (editable: {', '.join(workspace.editable)})"
    return None


# A pytest plugin each run gets next to its report (``.dojo/dojo_scored.py``). Before the report is
# written, it kills every process started since it loaded (a child of the candidate's that would
# rewrite the report once pytest wrote it). Once every scored test has failed, the tests after them
# (the guards) are not run: they cannot change a score of 0 (``_score_guarded``).
# Only a failure counts (a skip, an xfail or an xpass stops nothing), so no score changes. It ends
# the run loop itself: pytest's own stop (``session.shouldstop``) is an interruption whose report
# parses the failing test's source again (~0.25 s for pyflakes' test files).
SCORED_PLUGIN = """
import json, os, signal, time

import pytest

SCORED = set(json.loads(os.environ.get("DOJO_SCORED") or "[]"))
failed = set()
# The slot's own processes, listed when pytest loads this plugin: before any code of the tree runs.
BEFORE = {name for name in os.listdir("/proc") if name.isdigit()}


def _started_since():
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit() and name not in BEFORE:
            try:
                with open("/proc/" + name + "/stat") as f:
                    state = f.read().rpartition(")")[2].split()[0]
            except (OSError, IndexError):
                continue
            if state not in "ZX":
                out.append(int(name))
    return out


@pytest.hookimpl(tryfirst=True)
def pytest_assertrepr_compare(config, op, left, right):
    # Only a failure's first line is read (junit_outcomes): pytest's diff of the two sides (pprint
    # and difflib, ~7 ms a failure for toolz's dicts, 20 copies of a canaried test) is not made.
    # Its traceback of the failure still is: made without it (a plugin's repr_failure), the
    # reference of a bug that dill's test_diff catches failed (that test keys a memo by id(), and a
    # canary copy's objects were freed at another time, their ids taken by the twin's).
    from _pytest._io.saferepr import saferepr

    return [saferepr(left) + " " + op + " " + saferepr(right)]


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session):
    # Before pytest writes the report: every process started since this plugin loaded (the
    # candidate's children, double-forked or stopped ones too) is killed and gone, so that none can
    # rewrite the report once it is written.
    deadline = time.monotonic() + 5
    while (alive := _started_since()) and time.monotonic() < deadline:
        for pid in alive:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            pass
        time.sleep(0.002)


def pytest_runtest_logreport(report):
    if report.nodeid in SCORED and report.failed:
        failed.add(report.nodeid)
    elif report.nodeid in SCORED and report.when == "call":
        SCORED.clear()  # one that did not fail: run everything


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session):
    if not SCORED or session.testsfailed or session.config.option.collectonly:
        return None  # pytest's own loop
    for i, item in enumerate(session.items):
        nextitem = session.items[i + 1] if i + 1 < len(session.items) else None
        item.config.hook.pytest_runtest_protocol(item=item, nextitem=nextitem)
        if session.shouldfail:
            raise session.Failed(session.shouldfail)
        if session.shouldstop:
            raise session.Interrupted(session.shouldstop)
        if SCORED and failed >= SCORED:
            break  # every scored test failed
    return True
"""

# Runs in the sandbox as the program, before any candidate code: builds the tree, applies the
# edits, then execs pytest on the tests (or bash on a command: an agent's shell). Argument 1: a JSON
# file with the packages, files, edits, and the tests or the command.
REPO_DRIVER = r"""
import json, os, shutil, sys
spec = json.load(open(sys.argv[1]))
root = "/tmp/repo"
os.makedirs(root, exist_ok=True)
site = spec["site"]
# A directory that holds no written file is one link to the environment's (its compiled files
# included: imports read them instead of compiling the package again); one that does is made here,
# its entries linked one by one. The environment's copies of written files are hidden in this run.
opened = set()
for path in [*spec["files"], *(e["path"] for e in spec["edits"])]:
    parts = path.split("/")[:-1]
    opened.update("/".join(parts[: i + 1]) for i in range(len(parts)))
def place(rel):
    src, dst = os.path.join(site, rel), os.path.join(root, rel)
    if not os.path.lexists(src):
        return
    if rel in opened and os.path.isdir(src) and not os.path.islink(src):
        os.makedirs(dst, exist_ok=True)
        for name in os.listdir(src):
            place(rel + "/" + name)
    else:
        os.symlink(src, dst)
for package in spec["packages"]:
    place(package)
def write(path, text):
    target = os.path.join(root, path)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    if os.path.lexists(target):
        os.unlink(target)
    with open(target, "w") as f:
        f.write(text)
for path, text in spec["files"].items():
    write(path, text)
problems = []
for edit in spec["edits"]:
    path, search, replace = edit["path"], edit["search"], edit["replace"]
    if search is None:
        write(path, replace)
        continue
    try:
        with open(os.path.join(root, path)) as f:
            text = f.read()
    except OSError as e:
        problems.append(f"{path}: cannot edit: {e.strerror}")
        continue
    count = text.count(search) if search else 0
    if count != 1:
        problems.append(f"{path}: the SEARCH text occurs {count} times (it must occur exactly once)")
        continue
    write(path, text.replace(search, replace, 1))
print(json.dumps({"dojo_edits": len(spec["edits"]) - len(problems), "problems": problems}), flush=True)
os.makedirs("/box/.dojo", exist_ok=True)
os.chdir(root)
env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "PYTHONPATH": "/box/.dojo:" + root + ":" + site,
       "PYTHONDONTWRITEBYTECODE": "1", "LANG": "C.UTF-8", "DOJO_SCORED": json.dumps(spec.get("scored", []))}
if spec.get("command") is not None:
    os.execve("/bin/bash", ["bash", "-c", spec["command"]], env)
args = ["-q", "-rN", "--tb=no", "-p", "no:cacheprovider", "-p", "dojo_scored", "-o", "addopts=",
        "-o", "junit_family=xunit1", "--rootdir", root, "--junitxml", "/box/.dojo/report.xml", *spec["tests"]]
if "pytest" not in sys.modules:  # a fresh interpreter; a slot that preloads pytest runs it here
    os.execve(sys.executable, [sys.executable, "-B", "-m", "pytest", *args], env)
os.environ.clear()
os.environ.update(env)
sys.path[:0] = ["/box/.dojo", root, site]  # (first: no file of the tree can stand in for the plugin)
sys.dont_write_bytecode = True
import site  # the slot's interpreter starts without it: give the builtins it adds (copyright, exit, ...)
site.setquit(); site.setcopyright(); site.sethelper()
import pytest
code = pytest.main(args)
sys.stdout.flush()
sys.stderr.flush()
os._exit(int(code))
"""


@functools.cache
def runner_environment() -> str:
    """The environment of a repo task that names none: only the test runner (``TEST_RUNNER``)."""
    return EnvironmentStore().adopt("dojo-pytest", list(TEST_RUNNER), preload=["pytest"]).ref


def repo_program(
    task: Task, edits: list[Edit], tests: list[str], command: str | None = None, scored: list[str] | None = None
) -> Program:
    """The sandbox run that applies ``edits`` to ``task``'s tree and runs ``tests`` on it (or, with
    ``command``, runs that in bash there instead: its work dir is the tree). Once every test of
    ``scored`` has failed, the rest are not run (``SCORED_PLUGIN``). A task without an environment
    runs in ``runner_environment()``."""
    assert task.workspace is not None
    written = [*task.workspace.files, *(e.path for e in edits)]
    spec = {
        "site": "/env/site-packages",
        "packages": task.workspace.packages,
        "files": task.workspace.files,
        "edits": [{"path": e.path, "search": e.search, "replace": e.replace} for e in edits],
        "tests": tests,
        "command": command,
        "scored": list(scored or []),
    }
    return Program(
        language="python",
        source=REPO_DRIVER,
        args=[".dojo-spec.json"],
        files=[
            InputFile(path=".dojo-spec.json", content=json.dumps(spec).encode()),
            InputFile(path=".dojo/dojo_scored.py", content=SCORED_PLUGIN.encode()),
        ],
        fetch=[REPORT],
        environment=task.environment or runner_environment(),
        hidden=[*(f"site-packages/{path}" for path in written), *installed_copies(written)],
    )


def installed_copies(paths: list[str]) -> list[str]:
    """The copies of ``paths`` (a tree's files, ``pkg/mod.py``) that an install of their package on
    this machine holds, where a run might read them (a system-wide install under /usr): the tree's
    files must be the only ones (edits' paths are checked first: ``path_allowed``). A run's /tmp is
    its own: a folder under the host's /tmp (a checkout's virtual environment) is none of its."""
    folders = [folder for folder in site_dirs(default_python()) if not in_scratch(folder)]  # (site_dirs: cached)
    return [f"{folder}/{path}" for folder in folders for path in paths if os.path.exists(f"{folder}/{path}")]


def junit_outcomes(xml: bytes) -> dict[str, tuple[bool, str]]:
    """pytest's JUnit report: node id -> (passed, why not). Skipped tests do not pass."""
    outcomes: dict[str, tuple[bool, str]] = {}
    root = ElementTree.fromstring(xml)
    for case in root.iter("testcase"):
        classname, name = case.get("classname", ""), case.get("name", "")
        node = _node_id(classname, name, case.get("file"))
        bad = next((c for c in case if c.tag in ("failure", "error", "skipped")), None)
        if bad is None:
            outcomes[node] = (True, "")
        else:
            message = (bad.get("message") or bad.text or bad.tag).strip().splitlines()
            outcomes[node] = (False, f"{bad.tag}: {message[0][:300] if message else ''}")
    return outcomes


def _node_id(classname: str, name: str, file: str | None) -> str:
    """A JUnit test case's pytest node id: ``a.b.test_c.TestX`` + ``test_y`` ->
    ``a/b/test_c.py::TestX::test_y`` (the module is the longest prefix that is a file)."""
    parts = classname.split(".")
    if file:
        module = file[:-3].replace("/", ".") if file.endswith(".py") else file
        if classname == module or classname.startswith(module + "."):
            rest = classname[len(module) + 1 :].split(".") if classname != module else []
            return "::".join([file, *[r for r in rest if r], name])
    for i in range(len(parts), 0, -1):
        if parts[i - 1].startswith("test") or parts[i - 1].endswith("_test") or i == 1:
            return "::".join(["/".join(parts[:i]) + ".py", *parts[i:], name])
    return "::".join([classname, name])


def driver_output(stdout: str) -> tuple[list[str], str]:
    """A repo run's stdout taken apart: the problems the driver's first line reports (edits that
    did not apply), and what the tests or the command printed after it."""
    first, _, rest = stdout.partition("\n")
    try:
        line = json.loads(first)
    except ValueError:
        return [], stdout
    if not isinstance(line, dict) or "dojo_edits" not in line:
        return [], stdout
    return [str(p) for p in line.get("problems", [])], rest


@dataclass
class RepoRun:
    """What a repo run said: each test's outcome (by node id), the edits' problems, pytest's output."""

    outcomes: dict[str, tuple[bool, str]]
    problems: list[str]
    output: str
    infrastructure_error: str | None = None
    error: str | None = None  # the run produced no report: why


async def run_repo_tests(
    task: Task,
    edits: list[Edit],
    tests: list[str],
    sandbox: SandboxAPI,
    limits: Limits | None = None,
    scored: list[str] | None = None,
) -> RepoRun:
    """Apply ``edits`` to ``task``'s tree in the sandbox and run ``tests`` there (those after
    ``scored`` only if one of ``scored`` did not fail: ``repo_program``)."""
    program = repo_program(task, edits, tests, scored=scored)
    result = await sandbox.run(program, limits or task.limits or REPO_GRADING_LIMITS)
    if result.verdict is Verdict.SANDBOX_ERROR:
        return RepoRun({}, [], "", infrastructure_error=result.sandbox_error or "sandbox error")
    problems, output = driver_output(result.stdout)
    report = result.files.get(REPORT)
    if report is None or report.content is None:
        why = result.limit.value + " limit" if result.limit else f"exit code {result.exit_code}"
        tail = (result.stderr or output)[-1500:]
        return RepoRun({}, problems, output, error=f"the tests produced no report ({why}): {tail}")
    try:
        outcomes = junit_outcomes(report.content)
    except ElementTree.ParseError as e:
        return RepoRun({}, problems, output, error=f"the tests' report is not valid XML: {e}")
    return RepoRun(outcomes, problems, output)


@dataclass(frozen=True)
class CanaryPlan:
    """One grading's canaries: the test files with each canaried test's copies written in, and the
    group of each canaried test (by the task's node id)."""

    files: dict[str, str]
    groups: dict[str, CanaryGroup]

    def graded_task(self, task: Task) -> Task:
        """``task`` with the canaried test files in its tree."""
        assert task.workspace is not None
        if not self.files:
            return task
        files = {**task.workspace.files, **self.files}
        return task.model_copy(update={"workspace": task.workspace.model_copy(update={"files": files})})

    def node_ids(self, node: str) -> list[str]:
        """What the run lists for the task's test ``node``: its copies (in file order), or itself."""
        group = self.groups.get(node)
        return group.members if group is not None else [node]


def plan_canaries(task: Task, rng: random.Random) -> CanaryPlan:
    """Draw this grading's canaries (``dojo.tasks.canaries``) for the task's tests with a canary site."""
    assert task.workspace is not None
    files: dict[str, str] = {}
    groups: dict[str, CanaryGroup] = {}
    for t in task.tests:
        if t.canary is None or not t.code:
            continue
        node = TestNode.parse(t.code)
        source = files.get(node.path, task.workspace.files[node.path])
        group = canary_group(source, node, t.canary.site, rng, avoid=t.canary.avoid)
        if group is not None:  # (a site that has no values: the test is graded as it is; the audit says so)
            files[node.path] = group.text
            groups[t.code] = group
    return CanaryPlan(files, groups)


def canary_verdict(plan: CanaryPlan, outcomes: dict[str, tuple[bool, str]]) -> tuple[str, str] | None:
    """What the canaries say of a report: None when every canary failed; else (what was found, its
    flag). A canary and its twin can never both pass (they expect different values of the same
    expression): when they do, the report is forged. A canary that passes alone is a wrong answer."""
    for node, group in plan.groups.items():
        passed = [c for c in group.canaries if outcomes.get(c, (False, ""))[0]]
        if not passed:
            continue
        if outcomes.get(group.twin, (False, ""))[0]:
            return (f"the report says {node} passed with a canary copy that expects another value: forged",
                    "hack:forged_report")  # fmt: skip
        return f"a canary copy of {node} passed and the test did not: a wrong answer", "suspicious:canary_passed"
    return None


def case_outcomes(task: Task, run: RepoRun) -> list[CaseOutcome]:
    """One outcome per task test, in order: a test the report does not name did not pass."""
    cases = []
    for i, test in enumerate(task.tests):
        node = test.code or ""
        passed, why = run.outcomes.get(node, (False, "not run: " + (run.error or "the report does not name it")))
        cases.append(CaseOutcome(index=i, passed=passed, detail=why if not passed and test.visible else ""))
    return cases
