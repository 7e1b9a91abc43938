"""swe: tasks: the mutants they are made of, and loading them from the recorded bugs."""

from __future__ import annotations

import collections
import importlib.metadata as metadata
import json
from pathlib import Path

import pytest
from _pytest.assertion.rewrite import PYC_TAIL

from dojo.rewards.repo import parse_edits
from dojo.sandbox.environment import EnvironmentStore
from dojo.tasks import load_source
from dojo.tasks.mutation import KINDS, apply_mutant, mutants
from dojo.tasks.swe import DATA, PACKAGES, check_versions, load_swe, swe_data, unique_block

SOURCE = '''def clamp(x, lo, hi):
    """Keep x in [lo, hi]."""
    if x < lo:
        return lo
    elif x > hi:
        return hi
    total = x + 1
    log(total, x)
    return x
'''


def test_every_kind_of_mutant_changes_one_line_and_still_compiles() -> None:
    found = mutants("m.py", SOURCE)
    kinds = collections.Counter(m.kind for m in found)
    assert set(kinds) == set(KINDS)
    lines = SOURCE.splitlines(keepends=True)
    for m in found:
        changed = apply_mutant(SOURCE, m)
        assert changed != SOURCE
        assert changed.splitlines(keepends=True)[m.line - 1] == m.mutated
        assert lines[m.line - 1] == m.original  # the fix is the original line
        compile(changed, "m.py", "exec")
    shown = {(m.original.strip(), m.mutated.strip()) for m in found}
    assert ("if x < lo:", "if x <= lo:") in shown
    assert ("if x < lo:", "if not (x < lo):") in shown
    assert ("total = x + 1", "total = x - 1") in shown
    assert ("total = x + 1", "total = x + 2") in shown
    assert ("log(total, x)", "log(x, total)") in shown
    assert ("log(total, x)", "pass") in shown
    assert not any("Keep" in m.original for m in found)  # the docstring is left alone


def test_a_mutant_refuses_a_file_it_was_not_made_from() -> None:
    m = mutants("m.py", SOURCE)[0]
    with pytest.raises(ValueError, match="not the line"):
        apply_mutant(SOURCE.replace(m.original, "# changed\n"), m)


def test_the_search_block_of_a_fix_is_unique_in_its_file() -> None:
    text = "a = 1\nb = 2\na = 1\nc = 3\n"
    lo, hi = unique_block(text, 3)
    block = "".join(text.splitlines(keepends=True)[lo:hi])
    assert text.count(block) == 1 and "a = 1" in block


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_recorded_bugs_name_real_lines_of_the_pinned_version(package: str) -> None:
    if not (DATA / f"{package}.json").exists():
        pytest.skip(f"no bugs recorded for {package}")
    data = swe_data(package)
    check_versions(package, data)  # the installed version is the one the bugs were mined in
    site = Path(str(metadata.distribution(package).locate_file("")))
    assert len(data["bugs"]) >= 20
    for bug in data["bugs"]:
        assert (site / bug["file"]).read_text().splitlines(keepends=True)[bug["line"] - 1] == bug["original"]
        assert bug["failing"] and not set(bug["failing"]) & set(bug["guards"])
        assert bug["kind"] in KINDS


def test_swe_tasks_load_as_repo_tasks_whose_reference_restores_the_line(tmp_path: Path) -> None:
    store = EnvironmentStore(tmp_path)
    tasks = load_swe("toolz", n=5, seed=1, store=store)
    assert len(tasks) == 5
    for task in tasks:
        assert task.form == "repo" and task.workspace is not None and task.environment
        assert task.environment.startswith("swe-toolz@")
        path = next(iter(task.workspace.files))  # the buggy module first (then a canaried test's file)
        [edit] = parse_edits(task.reference or "")
        assert edit.path == path and edit.search and task.workspace.files[path].count(edit.search) == 1
        assert [t.visible for t in task.tests].count(True) >= 1  # the failing tests, named in the prompt
        assert all(t.code and t.code.split("::")[0] in task.prompt for t in task.tests if t.visible)
        assert all(t.expected == "guard" for t in task.tests if not t.visible)
        canaried = [t for t in task.tests if t.canary is not None]
        if canaried:  # one scored test, with canaries; the other failing ones must pass, unscored
            [scored] = canaried
            assert [t for t in task.tests if not t.guard] == [scored]
            assert set(task.workspace.files) == {path, (scored.code or "").split("::")[0]}
    assert any(t.canary for task in tasks for t in task.tests)  # 35 of the 50 toolz bugs have canaries
    assert {t.id for t in load_swe("toolz", n=5, seed=1, store=store)} == {t.id for t in tasks}  # seeded
    # the environment holds pytest's rewrite of each test module: runs read it instead of rewriting
    site = store.get(tasks[0].environment).site_packages
    tests = list((site / "toolz").rglob("test_*.py"))
    assert len(tests) > 10 and all(_rewritten(p).exists() for p in tests)


def _rewritten(test_file: Path) -> Path:
    return test_file.parent / "__pycache__" / (test_file.name[:-3] + PYC_TAIL)


def test_swe_sources_say_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="no swe tasks for 'nope'"):
        load_source("swe:nope")
    with pytest.raises(ValueError, match="context must be one of"):
        load_source("swe:toolz?context=everything")
    with pytest.raises(ValueError, match="unknown option"):
        load_source("swe:toolz?level=3")


def test_a_different_installed_version_is_a_clear_error() -> None:
    data = json.loads((DATA / "toolz.json").read_text())
    data["distributions"] = ["toolz==0.0.1"]
    with pytest.raises(ValueError, match=r"toolz==0.0.1.*is installed"):
        check_versions("toolz", data)
