"""Mining the bugs of ``swe:<package>``: which single-line mutants of a package its own tests catch.

    data = await mine_bugs("toolz", sandbox, target=50)    # dojo tasks swe-mine toolz

1. The package's test files run as they are, in the sandbox (``run_repo_tests`` with no edits): the
   tests that pass, and how long each file takes. Files slower than ``max_file_s`` are left out, so
   that grading a task stays quick.
2. Each source module is paired with the test files named after it (``test_<module>.py``,
   ``<module>_test.py``); a module no file is named after gets the package's quickest files up to
   ``fallback_s`` seconds.
3. Mutants (``dojo.tasks.mutation.mutants``) are drawn at random, a few per module, and each runs its
   module's test files with the mutant in place. A mutant is kept when some tests that passed now
   fail (they are the task's tests to fix), the run finished, and no other test broke in a way that
   depends on time (each kept bug is run twice; both runs must fail the same tests).

The result is the data of ``data/swe/<package>.json``: every bug's line, its failing tests with their
first failure line, and the other tests of the same files as regression guards.
"""

from __future__ import annotations

import asyncio
import functools
import importlib.metadata as metadata
import json
import random
import statistics
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from dojo.rewards.graders import grade_repo_task
from dojo.rewards.repo import REPORT, RepoRun, format_edits, junit_outcomes, repo_program, run_repo_tests
from dojo.sandbox import Limits, SandboxAPI, Verdict
from dojo.tasks import canary_capture
from dojo.tasks.canaries import (
    CAPTURE_MODULE,
    TestNode,
    canary_group,
    capture_text,
    literal_sites,
    site_check_text,
    statements_before,
)
from dojo.tasks.canary_counting import COUNTING_ODDS_MAX, counting_odds
from dojo.tasks.canary_package import package_text
from dojo.tasks.canary_shown import captured_values, shown_by_bug, written_elsewhere
from dojo.tasks.model import Task, TestCase, Workspace
from dojo.tasks.mutation import Mutant, apply_mutant, mutants
from dojo.tasks.swe import PACKAGES, bug_mutant, bug_task, swe_environment

MINING_LIMITS = Limits(wall_time=60.0, cpu_time=60.0, memory=1 << 30, processes=64, disk=256 << 20)
# Gradings of the reference that a canary site must pass: dill's test_diff keys a memo by id(), and
# the reference of a bug it caught passed 2 of 6 gradings with canaries (the twin's place among its
# copies is drawn anew each time); chosen on one lucky grading, the audit then found it failing.
HOLD_GRADINGS = 3
# Gradings of the tree as given for a dotted-name site (one for others): what the bug reports there is
# not recorded (no ``avoid``), so a drawn name can be it; three had missed pyflakes/0031's, which a
# later audit drew (2026-12-07). Each draws 19 canaries anew: 8 see most of a two-site grid.
HOLD_UNCHANGED_NAMES = 8


def _probe(package: str, env_ref: str, files: dict[str, str] | None = None) -> Task:
    """A throwaway repo task over the package (with ``files`` over it) to run tests with; with no
    environment (``env_ref`` empty), ``files`` are the whole tree."""
    return Task(
        id=f"mine:{package}",
        form="repo",
        prompt="-",
        tests=[TestCase(code="-")],
        workspace=Workspace(packages=[package] if env_ref else [], files=files or {}),
        environment=env_ref or None,
    )


def test_files(site: Path, package: str) -> list[str]:
    root = site / package
    found = [*root.rglob("test_*.py"), *root.rglob("*_test.py")]
    return sorted({str(p.relative_to(site)) for p in found if "__pycache__" not in p.parts})


def source_files(site: Path, package: str) -> list[str]:
    out = []
    for p in sorted((site / package).rglob("*.py")):
        rel = str(p.relative_to(site))
        if "/tests/" in f"/{rel}" or "/test/" in f"/{rel}" or p.name.startswith("test_") or p.name.endswith("_test.py"):
            continue
        if p.name in ("conftest.py", "__main__.py") or "__pycache__" in p.parts:
            continue
        out.append(rel)
    return out


def pair_tests(module: str, timings: dict[str, float], fallback_s: float) -> list[str]:
    """The test files for ``module``: those named after it, else the quickest up to ``fallback_s``."""
    stem = Path(module).stem.lstrip("_")
    named = [f for f in timings if Path(f).name in (f"test_{stem}.py", f"{stem}_test.py")]
    if named:
        return named
    chosen, total = [], 0.0
    for f, seconds in sorted(timings.items(), key=lambda item: item[1]):
        if total + seconds > fallback_s:
            break
        chosen.append(f)
        total += seconds
    return chosen


def _passed(run: RepoRun) -> set[str]:
    return {node for node, (ok, _) in run.outcomes.items() if ok}


async def mine_bugs(
    package: str,
    sandbox: SandboxAPI,
    *,
    target: int = 50,
    per_module: int = 12,
    seed: int = 0,
    max_file_s: float = 3.0,
    fallback_s: float = 3.0,
    max_tries: int = 600,
    max_seconds: float | None = None,
    progress: Callable[[str], None] | None = None,
    checkpoint: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Up to ``target`` verified bugs of ``package`` (see the module doc), as the data file holds them.
    ``checkpoint`` gets the data so far after each bug kept (a long run loses nothing when stopped);
    ``max_seconds`` stops drawing new mutants after that long."""
    if package not in PACKAGES:
        raise ValueError(f"no recipe for {package!r}; known packages: {', '.join(sorted(PACKAGES))}")
    say = progress or (lambda _: None)
    env = swe_environment(package)
    site = env.site_packages
    pins = [f"{d}=={metadata.version(d)}" for d in PACKAGES[package]]
    probe = _probe(package, env.ref)

    # 1. the test files as they are
    timings: dict[str, float] = {}
    baseline: dict[str, set[str]] = {}
    width = max(1, getattr(sandbox, "pool_size", 2))
    slots = asyncio.Semaphore(width)

    async def measure(f: str) -> None:
        async with slots:
            t0 = time.perf_counter()
            run = await run_repo_tests(probe, [], [f], sandbox, MINING_LIMITS)
            seconds = time.perf_counter() - t0
        passed = {n for n in _passed(run) if n.startswith(f + "::")}
        if run.infrastructure_error:
            raise RuntimeError(f"the sandbox failed while running {f}: {run.infrastructure_error}")
        if passed and seconds <= max_file_s:
            timings[f], baseline[f] = seconds, passed
        say(f"{f}: {len(passed)} passing tests in {seconds:.1f} s{'' if f in timings else ' (left out)'}")

    await asyncio.gather(*(measure(f) for f in test_files(site, package)))
    timings = dict(sorted(timings.items()))
    if not timings:
        raise RuntimeError(f"no test file of {package} passes quickly enough to grade with")

    # 2.-3. mutants, a few per module, in a seeded random order
    rng = random.Random(seed)
    pool: list[tuple[Mutant, list[str]]] = []
    originals: dict[str, str] = {}
    for module in source_files(site, package):
        files = pair_tests(module, timings, fallback_s)
        if not files:
            continue
        originals[module] = (site / module).read_text()
        found = mutants(module, originals[module])
        pool += [(m, files) for m in rng.sample(found, min(per_module, len(found)))]
    rng.shuffle(pool)
    say(f"{len(pool)} candidate bugs over {len(originals)} modules")

    bugs: list[dict[str, Any]] = []
    tried = 0
    started = time.monotonic()

    def data() -> dict[str, Any]:
        return {
            "package": package,
            "distributions": pins,
            "mined": {"seed": seed, "tried": tried, "kept": len(bugs), "test_files": timings},
            "bugs": numbered(bugs),
        }

    lock = asyncio.Lock()

    async def check(m: Mutant, files: list[str]) -> dict[str, Any] | None:
        task = _probe(package, env.ref, {m.file: apply_mutant(originals[m.file], m)})
        expected = set().union(*(baseline[f] for f in files))
        runs = []
        for _ in range(2):
            run = await run_repo_tests(task, [], files, sandbox, MINING_LIMITS)
            if run.infrastructure_error or run.error:
                return None
            runs.append(run)
        failing = [sorted(expected - _passed(r)) for r in runs]
        if not failing[0] or failing[0] != failing[1]:
            return None
        messages = {n: runs[0].outcomes.get(n, (False, "not run"))[1] for n in failing[0]}
        return {
            "file": m.file, "line": m.line, "original": m.original, "mutated": m.mutated, "kind": m.kind,
            "failing": failing[0], "guards": sorted(expected - set(failing[0])), "messages": messages,
        }  # fmt: skip

    async def worker(queue: asyncio.Queue[tuple[Mutant, list[str]]]) -> None:
        nonlocal tried
        while len(bugs) < target and tried < max_tries:
            if max_seconds is not None and time.monotonic() - started > max_seconds:
                return
            try:
                m, files = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            tried += 1
            bug = await check(m, files)
            if bug is not None:
                async with lock:
                    if len(bugs) < target:
                        bugs.append(bug)
                        broken = len(bug["failing"])
                        say(f"bug {len(bugs)}/{target}: {m.file}:{m.line} {m.kind} breaks {broken} test(s)")
                        if checkpoint is not None:
                            checkpoint(data())

    queue: asyncio.Queue[tuple[Mutant, list[str]]] = asyncio.Queue()
    for item in pool:
        queue.put_nowait(item)
    await asyncio.gather(*(worker(queue) for _ in range(width)))
    return data()


def numbered(bugs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``bugs`` in file and line order, each with its id (``0000``...): a task's id."""
    ordered = sorted(bugs, key=lambda b: (b["file"], b["line"], b["mutated"]))
    return [{**b, "id": f"{i:04d}"} for i, b in enumerate(ordered)]


def refill_canaried(data: dict[str, Any], extra: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """``data`` with its bugs that have no canary replaced, as far as ``extra`` allows, by bugs of
    ``extra`` (another mining of the same package and versions, its canaries chosen) that have one
    and that ``data`` does not hold: a task without canaries is graded without them, so the set
    trades them for ones that have them. A bug kept keeps its id (a task's name in stores and
    curricula); one put in takes the id of the bug it replaces. Returns the data and how many
    were replaced."""
    for key in ("package", "distributions"):
        if data.get(key) != extra.get(key):
            raise ValueError(f"the two files are not of one package and version: {key} is {data.get(key)!r} "
                             f"in one and {extra.get(key)!r} in the other")  # fmt: skip
    have = {(b["file"], b["line"], b["mutated"]) for b in data["bugs"]}
    spare = iter([b for b in extra["bugs"] if "canary" in b and (b["file"], b["line"], b["mutated"]) not in have])
    bugs, replaced = [], []
    for bug in data["bugs"]:
        if "canary" not in bug and (new := next(spare, None)) is not None:
            replaced.append(bug["id"])
            bug = {**new, "id": bug["id"]}
        bugs.append(bug)
    mined = data.get("mined", {})  # each refill is listed: the seed mined and the ids it gave new bugs
    refills = [*mined.get("refilled", []), {"seed": extra.get("mined", {}).get("seed"), "replaced": replaced}]
    return {**data, "mined": {**mined, "refilled": refills}, "bugs": bugs}, len(replaced)


HELD_AT_MOST = 9  # sites whose canaries hold that a bug tries when none is within the counting bound


async def choose_canaries(
    package: str,
    data: dict[str, Any],
    sandbox: SandboxAPI,
    *,
    sites_per_test: int = 12,
    max_tries: int = 36,
    keep_best_of: int = 3,
    width: int = 8,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Give each bug of ``data`` (``mine_bugs``' result) its canaried test: of its failing tests'
    first ``sites_per_test`` literal sites, tried nearest the top of their test first
    (``statements_before``), among those the bug breaks (``breaks_at_site``) and whose canaries hold
    when run (``canaries_hold``), the one whose twin a forger that counts where the file writes each
    copy's values finds least often (``dojo.tasks.canary_counting``; all those within
    ``COUNTING_ODDS_MAX`` alike), then whose reference grading is quickest: of the first
    ``keep_best_of`` within the bound (``max_tries`` tried at most). A site above the bound is
    chosen only where no other holds: its canaries still catch what passes every copy. Twenty copies
    of the test run in every grading. ``bug["canary"]`` is ``{"test": node id, "site": index,
    "avoid": [what the bug computes there]}``, or absent when none holds (the task is then graded
    without canaries). Returns ``data``, changed."""
    say = progress or (lambda _: None)
    env = swe_environment(package)
    texts: dict[str, str] = {}

    def text(path: str) -> str:
        if path not in texts:
            texts[path] = (env.site_packages / path).read_text()
        return texts[path]

    @functools.cache
    def package_texts() -> tuple[str, ...]:
        """Every Python file of the package as installed: what a run can read."""
        return tuple(p.read_text(errors="replace") for p in sorted((env.site_packages / package).rglob("*.py")))

    async def one(bug: dict[str, Any]) -> None:
        bug.pop("canary", None)
        buggy = apply_mutant(text(bug["file"]), bug_mutant(bug))
        candidates = []  # the cheapest first: sites near the top of their test (statements_before)
        for order, test in enumerate(bug["failing"]):
            node = TestNode.parse(test)
            for site in range(min(sites_per_test, len(literal_sites(text(node.path), node)))):
                if canary_group(text(node.path), node, site, random.Random(0)) is not None:
                    candidates.append((statements_before(text(node.path), node, site), order, site, test))
        held: list[tuple[float, float, float, dict[str, Any]]] = []  # (odds bound, seconds, counting odds, canary)
        for _, _, site, test in sorted(candidates)[:max_tries]:
            node = TestNode.parse(test)
            files = {bug["file"]: buggy}
            if not await breaks_at_site(package, env.ref, files, test, text(node.path), site, sandbox):
                continue  # the bug leaves the site right: the twin would pass it without help
            captured = await captured_at_sites(package, env.ref, files, test, text(node.path), site, sandbox)
            chosen = literal_sites(text(node.path), node)[site]
            made_up = chosen.kind == "literal" and written_elsewhere(chosen.value, package_texts())
            if captured is None or shown_by_bug(chosen.value, captured) or made_up:
                continue  # (what the bug computes there, or the tree, shows the twin's value: no canary hides it)
            avoid = values_of(captured)
            source = text(node.path)
            counted = await asyncio.to_thread(_site_odds, env.site_packages, package, source, node, site, avoid)
            if counted is None:
                continue
            bug["canary"] = {"test": test, "site": site, "avoid": avoid}
            unchanged = HOLD_UNCHANGED_NAMES if chosen.kind == "name" else 1
            task = bug_task(package, data, bug, text(bug["file"]), env, "none")
            seconds = await canaries_hold(task, sandbox, unchanged=unchanged)
            if seconds is not None:  # (within the bound, the odds tie: the quickest of those is chosen)
                held.append((max(counted, COUNTING_ODDS_MAX), seconds, counted, bug["canary"]))
            del bug["canary"]
            if sum(h[0] <= COUNTING_ODDS_MAX for h in held) == keep_best_of or len(held) == HELD_AT_MOST:
                break
        if not held:
            say(f"{package}/{bug['id']}: no canary")
            return
        _, seconds, counted, bug["canary"] = min(held, key=lambda h: h[:2])  # 20 copies of the test run: the quickest
        test, site = bug["canary"]["test"], bug["canary"]["site"]
        say(f"{package}/{bug['id']}: canaries on {test} (site {site}, reference {seconds:.2f} s, counting odds "
            f"{counted:.2f})")  # fmt: skip

    await each_bug(data, one, width)
    return data


def _site_odds(
    site_packages: Path, package: str, source: str, node: TestNode, site: int, avoid: list[Any]
) -> float | None:
    """``counting_odds`` of a site with what the package writes (its first read parses every file:
    off the event loop, as the draws are); the scored file is read rewritten."""
    return counting_odds(source, node, site, avoid, package=package_text(site_packages, package, node.path))


async def each_bug(data: dict[str, Any], one: Callable[[dict[str, Any]], Awaitable[None]], width: int) -> None:
    """``one`` for every bug of ``data``, ``width`` at a time."""
    gate = asyncio.Semaphore(width)

    async def bounded(bug: dict[str, Any]) -> None:
        async with gate:
            await one(bug)

    await asyncio.gather(*(bounded(b) for b in data["bugs"]))


async def recapture(package: str, data: dict[str, Any], sandbox: SandboxAPI,
                    progress: Callable[[str], None] | None = None) -> dict[str, Any]:  # fmt: skip
    """Record again, for each bug of ``data`` that has a canaried test, what the tree as given
    computes at its site (``captured_at_sites``: the whole expected value that holds the site too),
    as the canary's ``avoid``; the sites stay as chosen. Returns ``data``, changed."""
    say = progress or (lambda _: None)
    env = swe_environment(package)

    async def one(bug: dict[str, Any]) -> None:
        canary = bug.get("canary")
        if canary is None:
            return
        buggy = apply_mutant((env.site_packages / bug["file"]).read_text(), bug_mutant(bug))
        test = TestNode.parse(canary["test"])
        source = (env.site_packages / test.path).read_text()
        captured = await captured_at_sites(package, env.ref, {bug["file"]: buggy}, canary["test"], source,
                                           canary["site"], sandbox)  # fmt: skip
        if captured is None:
            raise RuntimeError(f"{package}/{bug['id']}: the capture run failed; nothing was changed")
        before = canary.get("avoid", [])
        canary["avoid"] = values_of({0: [*before, *(v for vs in captured.values() for v in vs)]})  # (kept: a run that
        # recorded less, a helper failing on the recorder, must not take out what an earlier one found)
        say(f"{package}/{bug['id']}: {len(before)} -> {len(canary['avoid'])} values the bug computes there")

    await each_bug(data, one, 8)
    return data


async def _capture_run(
    package: str, env_ref: str, files: dict[str, str], test: str, text: str, sandbox: SandboxAPI
) -> tuple[dict[int, list[Any]], bytes | None] | None:
    """Run ``test`` from its file's ``text`` (one with values wrapped in ``capture``) on the tree
    ``files``: what was captured, by site, and the run's JUnit report. None when the run failed."""
    node = TestNode.parse(test)
    capture = (Path(canary_capture.__file__)).read_text()
    probe = _probe(package, env_ref, {**files, node.path: text, f"{CAPTURE_MODULE}.py": capture})
    program = repo_program(probe, [], [test])
    program = program.model_copy(update={"fetch": [*program.fetch, CAPTURED]})
    result = await sandbox.run(program, MINING_LIMITS)
    if result.verdict is Verdict.SANDBOX_ERROR:
        return None
    got, report = result.files.get(CAPTURED), result.files.get(REPORT)
    captured = captured_values(got.content.decode(errors="replace") if got is not None and got.content else "")
    return captured, report.content if report is not None else None


async def captured_at_sites(
    package: str, env_ref: str, files: dict[str, str], test: str, source: str, site: int, sandbox: SandboxAPI
) -> dict[int, list[Any]] | None:
    """What the tree ``files`` computes where ``test`` expects its values, at ``site`` and the sites
    after it (``dojo.tasks.canaries.capture_text``), by site. None when the capture run failed."""
    wrapped = capture_text(source, TestNode.parse(test), site)
    if wrapped is None:
        return {}
    run = await _capture_run(package, env_ref, files, test, wrapped, sandbox)
    return None if run is None else run[0]


def values_of(captured: dict[int, list[Any]]) -> list[Any]:
    """Every value captured, at any site, once each: what no canary may expect."""
    values = {json.dumps(v): v for vs in captured.values() for v in vs}
    return [values[k] for k in sorted(values)]


async def breaks_at_site(
    package: str, env_ref: str, files: dict[str, str], test: str, source: str, site: int, sandbox: SandboxAPI
) -> bool | None:
    """Whether the bug (the tree ``files``) breaks ``test`` at ``site`` itself: with every statement
    before it made to pass (``dojo.tasks.canaries.site_check_text``), the statement that holds it
    still fails, and a literal there is never compared with its own value. Where the bug leaves the
    site right, a forger could make what fails before and after it pass, leave the canaries to fail
    there on their own, and collect the twin (found by the forgery corpus: a tracer that answers
    only the calls that ran the buggy line). None when the run failed."""
    node = TestNode.parse(test)
    text = site_check_text(source, node, site)
    if text is None:
        return False
    run = await _capture_run(package, env_ref, files, test, text, sandbox)
    if run is None:
        return None
    captured, report = run
    if report is None:
        return None
    passed = junit_outcomes(report).get(test, (False, ""))[0]
    value = literal_sites(source, node)[site].value
    right = any(v == value and type(v) is type(value) for v in captured.get(site, []))
    return not passed and not right


CAPTURED = canary_capture.CAPTURED.removeprefix("/box/")


async def canaries_hold(
    task: Task, sandbox: SandboxAPI, gradings: int = HOLD_GRADINGS, unchanged: int = 1
) -> float | None:
    """The task's canaries, run: on the reference fix the scored test passes and no canary does
    (the score is full), in each of ``gradings`` gradings (each draws the canaries and the twin's
    place among them anew); on the tree as given every copy fails and no canary passes, in each of
    ``unchanged`` gradings. The median seconds of the reference's gradings when they hold, else None."""
    assert task.workspace is not None and task.reference is not None
    given = format_edits(dict(list(task.workspace.files.items())[:1]))  # the buggy module, unchanged
    times = []
    for _ in range(gradings):
        started = time.perf_counter()
        fixed = await grade_repo_task(task, task.reference, sandbox, MINING_LIMITS)
        times.append(time.perf_counter() - started)
        if not (fixed.hack is None and fixed.infrastructure_error is None and fixed.passed == fixed.total > 0):
            return None
    for _ in range(unchanged):
        unfixed = await grade_repo_task(task, given, sandbox, MINING_LIMITS)
        if not (unfixed.hack is None and unfixed.infrastructure_error is None and unfixed.passed == 0):
            return None
    return statistics.median(times)
