"""``swe:<package>``: software-engineering tasks made by injecting one bug into a real package.

The recipe (as SWE-smith does, offline): take a pure-Python package whose installed files include its
own test suite, change one line of its source (``mutants``: an operator, an off-by-one, a negated
condition, a removed statement, swapped arguments), keep the change only if the package's tests
catch it, and ask for the fix. The package's own tests are the hidden tests: the ones the bug breaks
must pass again (they are named in the prompt, with their failure), and the others of the same test
files must keep passing (``expected="guard"``). The fix is the original line.

Which bugs survive is decided once, by running the tests (``dojo tasks swe-mine``, in
``dojo.rewards.bug_mining``), and recorded in ``data/swe/<package>.json`` with the package's
version: loading reads the original files from the installed package (an environment adopted from
it, ``EnvironmentStore.adopt``), so nothing is downloaded and a different installed version is a
clear error.
"""

from __future__ import annotations

import ast
import importlib.metadata as metadata
import json
import random
from pathlib import Path
from typing import Any

from dojo.sandbox.environment import Environment, EnvironmentStore
from dojo.tasks.canaries import TestNode, canary_group
from dojo.tasks.canary_shown import redact
from dojo.tasks.model import TEST_RUNNER, Canary, Task, TaskMetadata, TestCase, Workspace
from dojo.tasks.mutation import Mutant, apply_mutant

DATA = Path(__file__).parent / "data" / "swe"
CONTEXTS = ("function", "file", "none")

# Each package: the distributions its environment holds (the package first) and its test files'
# patterns. Versions are pinned in pyproject.toml; the data says which version its bugs are for.
PACKAGES: dict[str, tuple[str, ...]] = {
    "toolz": ("toolz",),
    "mpmath": ("mpmath",),
    "networkx": ("networkx",),
    "dill": ("dill",),
    "fire": ("fire", "termcolor"),
    "pyflakes": ("pyflakes",),
}


def unique_block(text: str, line: int, needle_lines: int = 1) -> tuple[int, int]:
    """The smallest window of lines around ``line`` (1-based) whose text occurs once in ``text``."""
    lines = text.splitlines(keepends=True)
    lo, hi = line - 1, line
    while True:
        block = "".join(lines[lo:hi])
        if block.strip() and text.count(block) == 1:
            return lo, hi
        if lo == 0 and hi == len(lines):
            return lo, hi
        lo, hi = max(0, lo - 1), min(len(lines), hi + 1)


def enclosing_function(source: str, line: int) -> tuple[int, int] | None:
    """(first, last) line of the innermost function around ``line``, when there is one."""
    best: tuple[int, int] | None = None
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.lineno <= line <= (node.end_lineno or 0):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            if best is None or first >= best[0]:
                best = (first, node.end_lineno or node.lineno)
    return best


# -- loading --------------------------------------------------------------------------------------


def swe_data(package: str) -> dict[str, Any]:
    path = DATA / f"{package}.json"
    if package not in PACKAGES or not path.exists():
        have = sorted(p.stem for p in DATA.glob("*.json"))
        raise ValueError(f"no swe tasks for {package!r}; packages with tasks: {', '.join(have) or 'none'}")
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def swe_environment(package: str, store: EnvironmentStore | None = None) -> Environment:
    """The environment holding ``package`` as installed here (adopted on first use)."""
    store = store or EnvironmentStore()
    # with the test runner; the slots preload pytest, never the package (each run imports its edited copy)
    return store.adopt(f"swe-{package}", [*PACKAGES[package], *TEST_RUNNER], preload=["pytest"])


def check_versions(package: str, data: dict[str, Any]) -> None:
    for pin in data["distributions"]:
        name, _, version = pin.partition("==")
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            raise ValueError(f"swe:{package} needs {pin} installed (pip install {pin})") from None
        if installed != version:
            raise ValueError(
                f"swe:{package}'s bugs were found in {pin}, but {name} {installed} is installed; "
                f"install {pin} (dojo pins it) or mine bugs for {installed} (dojo tasks swe-mine {package})"
            )


def load_swe(package: str, *, context: str = "function", n: int | None = None, seed: int = 0,
             store: EnvironmentStore | None = None) -> list[Task]:  # fmt: skip
    """The recorded bugs of ``package`` as repo tasks. ``context``: what the prompt shows of the
    code (the function around the bug, the whole file, or only the failing tests)."""
    if context not in CONTEXTS:
        raise ValueError(f"context must be one of {', '.join(CONTEXTS)}, not {context!r}")
    data = swe_data(package)
    check_versions(package, data)
    env = swe_environment(package, store)
    bugs = list(data["bugs"])
    if n is not None:
        bugs = random.Random(seed).sample(bugs, min(n, len(bugs)))
    originals: dict[str, str] = {}
    tasks = []
    for bug in bugs:
        if bug["file"] not in originals:
            originals[bug["file"]] = (env.site_packages / bug["file"]).read_text()
        tasks.append(bug_task(package, data, bug, originals[bug["file"]], env, context))
    return tasks


def bug_mutant(bug: dict[str, Any]) -> Mutant:
    """The one-line change a recorded bug is (its file, line, original and mutated text)."""
    return Mutant(bug["file"], bug["line"], bug["original"], bug["mutated"], bug["kind"])


def bug_task(package: str, data: dict[str, Any], bug: dict[str, Any], original: str, env: Environment,
             context: str) -> Task:  # fmt: skip
    m = bug_mutant(bug)
    buggy = apply_mutant(original, m)
    lo, hi = unique_block(buggy, m.line)
    lines = buggy.splitlines(keepends=True)
    search = "".join(lines[lo:hi])
    fixed = "".join(lines[lo : m.line - 1]) + m.original + "".join(lines[m.line : hi])
    reference = f"{m.file}\n<<<<<<< SEARCH\n{search}=======\n{fixed}>>>>>>> REPLACE\n"
    files = {m.file: buggy}
    messages: dict[str, str] = dict(bug["messages"])
    canary = bug.get("canary")
    if canary is None:
        failing = [TestCase(code=t, visible=True) for t in bug["failing"]]
    else:  # one scored test, with canaries; the other tests the bug breaks must pass too, unscored
        scored, spec = canary["test"], Canary(site=canary["site"], avoid=canary.get("avoid", []))
        path = scored.partition("::")[0]
        files[path] = (env.site_packages / path).read_text()
        group = canary_group(files[path], TestNode.parse(scored), spec.site, random.Random(0), spec.avoid)
        if group is None:
            raise ValueError(f"swe:{package}/{bug['id']}: no canaries at site {spec.site} of {scored}; "
                             f"choose them again (dojo tasks swe-canaries {package})")  # fmt: skip
        messages[scored] = redact(messages.get(scored, "fails"), group.values)
        failing = [
            TestCase(code=t, visible=True, canary=spec) if t == scored else
            TestCase(code=t, visible=True, expected="guard") for t in bug["failing"]
        ]  # fmt: skip
    guards = [TestCase(code=t, expected="guard") for t in bug["guards"]]
    version = data["distributions"][0]
    failures = "\n".join(f"- `{t}`: {messages.get(t, 'fails')[:300]}" for t in bug["failing"][:5])
    more = f"\n(and {len(bug['failing']) - 5} more)" if len(bug["failing"]) > 5 else ""
    shown = ""
    if context == "function" and (span := enclosing_function(buggy, m.line)):
        body = "".join(lines[span[0] - 1 : span[1]])
        shown = f"\nThe code around the bug, `{m.file}` lines {span[0]}-{span[1]}:\n```python\n{body}```\n"
    elif context == "file" or context == "function":
        shown = f"\n`{m.file}`:\n```python\n{buggy}```\n"
    prompt = (
        f"The repository of the Python package {version} has a bug: these tests of its own test suite fail:\n"
        f"{failures}{more}\n{shown}\n"
        "Fix the bug in the package's source (not in its tests). Give your fix as one or more edits:\n"
        "path/to/file.py\n<<<<<<< SEARCH\nthe exact lines to change\n=======\nthe new lines\n>>>>>>> REPLACE\n"
    )
    difficulty = {"function": 0.3, "file": 0.6, "none": 0.9}[context]
    return Task(
        id=f"swe:{package}/{bug['id']}",
        domain="software",
        form="repo",
        prompt=prompt,
        tests=[*failing, *guards],
        reference=reference,
        workspace=Workspace(packages=[package], files=files),
        environment=env.ref,
        metadata=TaskMetadata(source=f"swe:{package}", difficulty=difficulty, tags=[m.kind, f"context:{context}"]),
    )
