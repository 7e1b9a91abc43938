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
the task's own. The edits are applied in the sandbox by a driver (``dojo.rewards.programs.
repo_driver``) before any of the candidate's code runs: it builds the tree (the environment's
packages as symlinks, the workspace's files, then the edits), and only then execs pytest. What
pytest reports comes from the process that imports the candidate's code: docs/threat-model.md says what that means.
"""

from __future__ import annotations

import asyncio
import fnmatch
import functools
import json
import logging
import os
import random
import re
import xml.etree.ElementTree as ElementTree
from collections.abc import Collection, Container
from dataclasses import dataclass
from pathlib import Path

from dojo.rewards.extract import delimited
from dojo.rewards.outcome import CaseOutcome
from dojo.rewards.programs import program_source
from dojo.sandbox import InputFile, Limits, Program, SandboxAPI, Verdict
from dojo.sandbox.environment import EnvironmentNotFound, EnvironmentStore
from dojo.sandbox.languages import default_python
from dojo.sandbox.program import in_scratch
from dojo.sandbox.runtime import site_dirs
from dojo.tasks.canaries import CanaryGroup, TestNode, canary_group
from dojo.tasks.canary_package import PackageText, package_phrases, package_text
from dojo.tasks.model import TEST_RUNNER, Task, Workspace

REPO_GRADING_LIMITS = Limits(wall_time=120.0, cpu_time=120.0, memory=1 << 30, processes=64, disk=256 << 20)
REPORT = ".dojo/report.xml"
FILE_OPEN = re.compile(r'<file\s+path\s*=\s*"([^"]+)"\s*>\n?')
FILE_CLOSE = re.compile(r"</file>")
SEARCH_OPEN = re.compile(  # (linear: two adjacent runs of [ \t]* around no backtick had made 16,000 spaces 15 s)
    r"^[ \t]*(?:`+[ \t]*)?(?:[\w+-]+[ \t]+)?([^\s`<>=]+)[ \t]*\n"  # the path line (possibly a fence ```python path)
    r"(?:[ \t]*```[\w+-]*[ \t]*\n)?"  # or a fence on its own line after the path
    r"<<<<<<< SEARCH[ \t]*\n",
    re.MULTILINE,
)
SEARCH_DIVIDER = re.compile(r"^=======[ \t]*\n", re.MULTILINE)
SEARCH_CLOSE = re.compile(r"^>>>>>>> REPLACE[ \t]*$", re.MULTILINE)


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
    for m, text in delimited(completion, FILE_OPEN, FILE_CLOSE):
        found.append((m.start(), Edit(path=m.group(1).strip(), replace=text)))
    for m, block in delimited(completion, SEARCH_OPEN, SEARCH_CLOSE):
        divider = SEARCH_DIVIDER.search(block)
        if divider is not None:  # (the first divider: the search text holds none)
            edit = Edit(path=m.group(1).strip(), search=block[: divider.start()], replace=block[divider.end() :])
            found.append((m.start(), edit))
    return [e for _, e in sorted(found, key=lambda item: item[0])]


def format_edits(files: dict[str, str]) -> str:
    """Whole files as a completion (what an agent's edits submit)."""
    return "\n".join(f'<file path="{path}">\n{text}</file>' for path, text in files.items())


MAX_WRITTEN_FILES = 64  # files one change may write beyond the task's own (each is hidden elsewhere in the run)
MAX_EDIT_PATH = 200  # characters of a path a change writes (hidden as site-packages/<path> and under /usr: <= 255)


def path_allowed(path: str, workspace: Workspace, written: Collection[str] = ()) -> str | None:
    """None when a candidate may change ``path``; else why not. ``written``: the paths of the same
    change already allowed, beyond the task's own files: one change writes at most
    ``MAX_WRITTEN_FILES`` more (each written file's other copies are hidden from the run, a list
    ``Program.hidden`` bounds; 260 new files had made the grade raise, and a rollout stop)."""
    parts = path.split("/")
    if not path or path.startswith("/") or any(p in ("", ".", "..") for p in parts):
        return f"{path!r} is not a relative path inside the tree"
    if len(path) > MAX_EDIT_PATH:
        return f"{path[:40]!r}... is longer than {MAX_EDIT_PATH} characters"
    for pattern in workspace.protected:
        if fnmatch.fnmatch(path, pattern):
            return f"{path} is protected ({pattern}): the task's tests and what runs before them are its own"
    if not any(fnmatch.fnmatch(path, pattern) for pattern in workspace.editable):
        return f"{path} is not editable (editable: {', '.join(workspace.editable)})"
    if path not in workspace.files and path not in written and len(written) >= MAX_WRITTEN_FILES:
        return f"{path} would be the change's file {MAX_WRITTEN_FILES + 1}: a change writes at most {MAX_WRITTEN_FILES}"
    return None


def allowed_edits(edits: list[Edit], workspace: Workspace) -> tuple[list[Edit], list[str]]:
    """The edits that apply, in order, and why each other one does not (``path_allowed``)."""
    allowed: list[Edit] = []
    refused: list[str] = []
    written: set[str] = set()
    for e in edits:
        why = path_allowed(e.path, workspace, written)
        if why is None:
            allowed.append(e)
            if e.path not in workspace.files:
                written.add(e.path)
        else:
            refused.append(why)
    return allowed, refused


@functools.cache
def runner_environment() -> str:
    """The environment of a repo task that names none: only the test runner (``TEST_RUNNER``)."""
    return EnvironmentStore().adopt("dojo-pytest", list(TEST_RUNNER), preload=["pytest"]).ref


def repo_program(
    task: Task, edits: list[Edit], tests: list[str], command: str | None = None, scored: list[str] | None = None
) -> Program:
    """The sandbox run that applies ``edits`` to ``task``'s tree and runs ``tests`` on it (or, with
    ``command``, runs that in bash there instead: its work dir is the tree). Once every test of
    ``scored`` has failed, the rest are not run (``dojo.rewards.programs.repo_plugin``). A task without an environment
    runs in ``runner_environment()``."""
    assert task.workspace is not None
    written = list(dict.fromkeys([*task.workspace.files, *(e.path for e in edits)]))  # (an edit per block: once each)
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
        source=program_source("repo_driver"),  # builds the tree, applies the edits, execs pytest
        args=[".dojo-spec.json"],
        files=[
            InputFile(path=".dojo-spec.json", content=json.dumps(spec).encode()),
            InputFile(path=".dojo/dojo_scored.py", content=program_source("repo_plugin").encode()),
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


class ReportInvalid(ValueError):
    """A JUnit report that is not one (the run's files are the candidate's to write: any bytes)."""


def junit_outcomes(xml: bytes) -> dict[str, tuple[bool, str]]:
    """pytest's JUnit report: node id -> (passed, why not). Skipped tests do not pass. Read as UTF-8
    whatever it declares (``encoding="foo"``, written by a candidate over pytest's report, raised
    ``LookupError`` out of the grade and stopped the rollout); ``ReportInvalid`` when it does not parse."""
    outcomes: dict[str, tuple[bool, str]] = {}
    try:
        root = ElementTree.fromstring(xml, parser=ElementTree.XMLParser(encoding="utf-8"))
    except (ElementTree.ParseError, LookupError, UnicodeError, ValueError) as e:
        raise ReportInvalid(f"{type(e).__name__}: {e}") from None
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
    try:  # (in a worker thread: a forged report of 16 MiB took ~3 s to parse)
        outcomes = await asyncio.to_thread(junit_outcomes, report.content)
    except ReportInvalid as e:
        return RepoRun({}, problems, output, error=f"the tests' report is not valid XML: {e}")
    return RepoRun(outcomes, problems, output)


# A grading's flag where a canaried test's package could not be read on the grading host (its
# environment is not on this machine: a grader beside a remote sandbox fleet): a string's canaries
# were drawn without the phrases the package writes, which a forger that prefers the package's own
# phrases reads more often (docs/threat-model.md, "A phrase's word, a list's numbers").
PHRASES_UNREAD = "weak:canary_phrases_unread"
_log = logging.getLogger(__name__)
_UNREAD_SAID: set[str] = set()  # (the environments already named in the log: once a process)


@dataclass(frozen=True)
class CanaryPlan:
    """One grading's canaries: the test files with each canaried test's copies written in, and the
    group of each canaried test (by the task's node id). ``phrases_unread``: a string's canaries were
    drawn without their package's phrases, which this machine could not read (``PHRASES_UNREAD``)."""

    files: dict[str, str]
    groups: dict[str, CanaryGroup]
    phrases_unread: bool = False

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


def _installed(task: Task, node: TestNode) -> Path | None:
    """The site-packages of the environment that installs the package of a repo task's test (what
    the run reads), when this machine holds it and that package."""
    if not task.environment:
        return None
    store = EnvironmentStore()
    try:
        environment = store.cached(task.environment) or store.get(task.environment)
    except (EnvironmentNotFound, OSError, ValueError):  # (a store this machine cannot read: no package)
        return None
    package = node.path.partition("/")[0]
    return environment.site_packages if (environment.site_packages / package).is_dir() else None


def package_of(task: Task, node: TestNode) -> PackageText | None:
    """What the package of a repo task's test writes, as its environment installs it
    (``dojo.tasks.canary_package.package_text``: what a forger reads where the run can read it, the
    test's own file left out); None without one."""
    site = _installed(task, node)
    return None if site is None else package_text(site, node.path.partition("/")[0], node.path)


def phrases_of(task: Task, node: TestNode) -> Container[str] | None:
    """The pairs of words the package of a repo task's test writes, its own file left out
    (``package_phrases``: what a string's canaries keep); none for a task without an environment,
    None where its environment, or the package in it, is not on this machine to read."""
    site = _installed(task, node)
    if site is not None:
        return package_phrases(site, node.path.partition("/")[0], node.path)
    if not task.environment:
        return frozenset()
    if task.environment not in _UNREAD_SAID:
        _UNREAD_SAID.add(task.environment)
        _log.warning(
            "environment %s, with package %s in it, is not on this machine: the canaries of its tasks' strings "
            "are drawn without the phrases the package writes, and each such grading is flagged %s (grade where "
            "the environment is, or build it here: dojo env build)",
            task.environment, node.path.partition("/")[0], PHRASES_UNREAD,
        )  # fmt: skip
    return None


def plan_canaries(task: Task, rng: random.Random) -> CanaryPlan:
    """Draw this grading's canaries (``dojo.tasks.canaries``) for the task's tests with a canary site;
    a string's keep the phrases the package writes (``phrases_of``)."""
    assert task.workspace is not None
    files: dict[str, str] = {}
    groups: dict[str, CanaryGroup] = {}
    unread = False
    for t in task.tests:
        if t.canary is None or not t.code:
            continue
        node = TestNode.parse(t.code)
        source = files.get(node.path, task.workspace.files[node.path])
        phrases = phrases_of(task, node)
        kept = frozenset() if phrases is None else phrases
        group = canary_group(source, node, t.canary.site, rng, t.canary.avoid, kept)
        if group is not None:  # (a site that has no values: the test is graded as it is; the audit says so)
            files[node.path] = group.text
            groups[t.code] = group
            unread = unread or (phrases is None and group.strings)
    return CanaryPlan(files, groups, unread)


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
