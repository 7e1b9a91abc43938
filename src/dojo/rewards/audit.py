"""Task audit: is every task of a set verifiable, discriminating, stable and unique?

For each task: the reference solution must pass (every time, over ``repeats`` runs), the empty
candidate and a handful of trivial ones (``return None``, ``return 0``, the identity, an empty
program, a repo task's tree left as it is, ...) must not, those that do nothing at all (the empty
answer, no call, the tree left as it is, an empty program) must earn nothing (``do_nothing_earns``:
not even partial credit), and no infrastructure error may stand in the way. Across the set, prompts
that are near-duplicates (MinHash over word 3-grams) are reported. Each task gets a difficulty
estimate: the source's own when it has one, else one from the size of its reference solution.
"""

from __future__ import annotations

import ast
import asyncio
import collections
import contextlib
import json
import math
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from datasketch import MinHash, MinHashLSH

from dojo.errors import InputError
from dojo.rewards.analysis import constant_answers, trivial_analysis_candidates
from dojo.rewards.calls import check_calls, parse_calls
from dojo.rewards.documents import FILLER, fetch_document, hollow_document
from dojo.rewards.extract import extract_code
from dojo.rewards.graders import Grader, check_program
from dojo.rewards.harness import InvalidTask
from dojo.rewards.outcome import Reward
from dojo.rewards.repo import format_edits, package_of, parse_edits, plan_canaries
from dojo.rewards.report import trivial_report_candidates
from dojo.rewards.scene import trivial_scene_candidates
from dojo.rewards.simulated_api import run_api_calls
from dojo.sandbox import SandboxAPI
from dojo.tasks.canaries import COPIES, TestNode, literal_sites
from dojo.tasks.canary_counting import COUNTING_ODDS_MAX, counting_odds
from dojo.tasks.canary_shown import shown_by_bug, written_elsewhere
from dojo.tasks.gold_calls import gold_turns
from dojo.tasks.model import Task
from dojo.tasks.mutation import apply_mutant, mutants
from dojo.tasks.swe import enclosing_function

TRIVIAL_RETURNS = ("None", "0", "1", "''", "[]", "True", "False", "args[0] if args else None")
TRIVIAL_PROGRAMS = {
    "python": ("", "import sys\nprint(sys.stdin.read())", "print(0)"),
    "bash": ("", "cat", "echo 0"),
    "c": ("int main(void){return 0;}",),
    "cpp": ("int main(){return 0;}",),
    "javascript": ("", "process.stdin.pipe(process.stdout)"),
    "sql": ("SELECT 1 WHERE 0;", "SELECT 0;", "SELECT name FROM sqlite_master;"),  # no rows, a constant, the tables
}
# The trivial candidates that do nothing at all: none of them may earn any reward (a reward that
# idling earns is what a policy learns first), where trivial ones may only not pass.
DO_NOTHING = frozenset(
    {
        "empty",
        "no call",
        "unchanged tree",
        "empty program",
        "return None",
        "headings only",
        "headings and filler",
        "objects at the origin",
        "question echoed",
        "claims success",
        "empty report",
        "report of zeros",
    }
)
HOLLOW = ("headings only", "headings and filler")  # document scripts of the audit's own: run once per distinct one
COMPLIANCE_CLAIM = "The document above follows every requirement: all sections, fields and totals are correct."
TRIVIAL_ANSWERS = ("<answer></answer>", "<answer>0</answer>", "<answer>1</answer>", "<answer>yes</answer>")


@dataclass
class TaskAudit:
    id: str
    form: str
    source: str
    status: str = "ok"  # ok | unverifiable | error
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    reference_rewards: list[float | None] = field(default_factory=list)
    trivial_passed: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)  # the first DUPLICATES_LISTED, by id
    duplicate_count: int = 0  # how many tasks in all
    difficulty: float | None = None
    difficulty_source: str = "unknown"
    reference_ms: float | None = None
    mutants_tried: int = 0
    mutants_survived: list[str] = field(default_factory=list)  # "line N: old -> new" the tests did not catch
    forge_odds: float | None = None  # repo: what a forger that passes one copy of each canaried test expects


@dataclass(repr=False)
class AuditReport:
    tasks: list[TaskAudit]
    seconds: float
    repeats: int

    def __repr__(self) -> str:  # (thousands of tasks: a full repr is megabytes, see dojo.cli.running)
        return f"AuditReport({len(self.tasks)} tasks, {len(self.unverifiable)} not verifiable, {self.seconds:.1f} s)"

    @property
    def unverifiable(self) -> list[TaskAudit]:
        return [t for t in self.tasks if t.status != "ok"]

    def summary(self) -> dict[str, Any]:
        counts: dict[str, int] = {}
        for t in self.tasks:
            for p in t.problems:
                kind = p.split(":")[0]
                counts[kind] = counts.get(kind, 0) + 1
        return {
            "tasks": len(self.tasks),
            "verifiable": sum(t.status == "ok" for t in self.tasks),
            "unverifiable": sum(t.status == "unverifiable" for t in self.tasks),
            "errors": sum(t.status == "error" for t in self.tasks),
            "problems": counts,
            "near_duplicates": sum(bool(t.duplicates) for t in self.tasks),
            **self.canary_summary(),
            **self.mutation_summary(),
            "seconds": round(self.seconds, 2),
        }

    def canary_summary(self) -> dict[str, Any]:
        """Of the repo tasks, how many are graded with canaries, and the worst forger's odds."""
        repo = [t for t in self.tasks if t.form == "repo"]
        if not repo:
            return {}
        odds = [t.forge_odds for t in repo if t.forge_odds is not None]
        return {"canaried": len(odds), "no_canary": len(repo) - len(odds), "worst_forge_odds": max(odds, default=None)}

    def mutation_summary(self) -> dict[str, Any]:
        """The mutation score: of the reference's mutants tried, the share the tests caught."""
        tried = sum(t.mutants_tried for t in self.tasks)
        if not tried:
            return {}
        survived = sum(len(t.mutants_survived) for t in self.tasks)
        return {
            "mutants": tried,
            "mutants_survived": survived,
            "mutation_score": round(1 - survived / tried, 4),
            "tasks_with_survivors": sum(bool(t.mutants_survived) for t in self.tasks),
        }

    def to_json(self) -> dict[str, Any]:
        return {"summary": self.summary(), "repeats": self.repeats, "tasks": [asdict(t) for t in self.tasks]}


CANARY_FLAGS = frozenset({"hack:forged_report", "suspicious:canary_passed"})


# The audit's own measure of the counting forger: draws of its own (mining measured 60 with seed 0 and
# kept the lowest reading, so those draws would echo it) and more of them: at 60, a fair site read
# above 0.1 in ~7% of sites and one at 0.15 below it in ~18% (a review, 2026-12-07).
AUDIT_COUNTING_DRAWS = 200
AUDIT_COUNTING_SEED = 1


def forge_odds(task: Task) -> float | None:
    """A repo task's reward that a forger expects who makes one copy of each canaried scored test
    pass, picked at random or by ranking the copies by what the test file writes
    (``dojo.tasks.canary_counting.counting_odds``), whichever pays it more (it must pick every twin);
    None when no scored test has canaries."""
    if task.workspace is None:
        return None
    plan = plan_canaries(task, random.Random(0))
    odds = 1.0
    for t in task.tests:
        if t.canary is None or t.code not in plan.groups:
            continue
        node = TestNode.parse(t.code)
        source = task.workspace.files.get(node.path, "")
        rng = random.Random(AUDIT_COUNTING_SEED)
        package = package_of(task, node)
        counted = counting_odds(source, node, t.canary.site, t.canary.avoid, AUDIT_COUNTING_DRAWS, rng, package)
        odds *= max(1 / len(plan.groups[t.code].members), counted or 0.0)
    return odds if plan.groups else None


def shown_sites(task: Task) -> list[str]:
    """A repo task's canaried tests whose site the bug's recorded result shows (``Canary.avoid``,
    ``dojo.tasks.canary_shown.shown_by_bug``), or whose string the task's files write elsewhere
    (``written_elsewhere``): a forger that holds the copies' values against what the bug computed,
    or counts where each is written, finds the twin there, whatever the canaries."""
    out = []
    for t in task.tests:
        if t.canary is None or not t.code or task.workspace is None:
            continue
        node = TestNode.parse(t.code)
        sites = literal_sites(task.workspace.files.get(node.path, ""), node)
        if not 0 <= t.canary.site < len(sites):
            continue
        value = sites[t.canary.site].value
        texts = list(task.workspace.files.values()) if sites[t.canary.site].kind == "literal" else []
        if shown_by_bug(value, {0: list(t.canary.avoid)}) or written_elsewhere(value, texts):
            out.append(f"{t.code} ({value!r})")
    return out


def trivial_candidates(task: Task) -> list[tuple[str, str]]:
    """(name, completion) pairs that must not pass a discriminating task."""
    if task.form == "answer" and task.answer_match == "fields":
        return trivial_report_candidates(task)
    if task.form == "answer":
        return [(a, a) for a in TRIVIAL_ANSWERS]
    if task.form in ("function", "assert"):
        entry = task.entry_point
        return [(f"return {r}", f"def {entry}(*args, **kwargs):\n    return {r}\n") for r in TRIVIAL_RETURNS]
    if task.form == "tools" and task.api is not None and task.api.check == "geometry":
        return trivial_scene_candidates(task)
    if task.form == "tools" and task.api is not None:  # a conversation: no call, one turn's, all at once
        gold = json.loads(task.reference or '{"turns": []}').get("turns", [])
        calls = [c for turn in gold for step in turn for c in step]
        out = [("no call", "I cannot do that with these tools.")]
        if sum(1 for turn in gold if any(turn)) > 1:
            out.append(("first turn only", json.dumps({"turns": gold[:1]})))
            out.append(("all calls in the first turn", json.dumps({"turns": [[calls]]})))
        return out
    if task.form == "tools":  # no call at all (the answer when none of the tools fits), or a bare call
        names = [t["function"]["name"] for t in task.tools[:2]]
        bare = [(f"call {n} bare", f'<tool_call>{{"name": "{n}", "arguments": {{}}}}</tool_call>') for n in names]
        if any(isinstance(t.expected, dict) and t.expected.get("any_call") for t in task.tests):
            bare = []  # any call answers a relevance task: only making none must fail
        return bare if task.abstains else [("no call", "I cannot do that with these tools."), *bare]
    if task.form == "analysis":  # no program, an answer file of zeros, the question printed
        return trivial_analysis_candidates(task)
    if task.form == "document":  # the prompt given back, a claim, the required headings with nothing under them
        hollow, filled = hollow_document(task), hollow_document(task, FILLER)
        out = [] if hollow is None or filled is None else [("headings only", hollow), ("headings and filler", filled)]
        if task.document is not None and task.document.path is not None:
            return [("empty program", "```python\n\n```"), *out]
        return [("prompt echoed", task.prompt_text()), ("claims compliance", COMPLIANCE_CLAIM), *out]
    if task.form == "repo":  # the tree as given (an edit that changes nothing): its tests must fail
        assert task.workspace is not None
        return [("unchanged tree", format_edits(dict(list(task.workspace.files.items())[:1])))]
    programs = TRIVIAL_PROGRAMS.get(task.language, ("",))
    return [("empty program" if not src else f"program {i}", f"```\n{src}\n```") for i, src in enumerate(programs)]


def _dict_options(value: Any) -> list[tuple[str, Any]]:
    """(where, allowed values) of each key of an allowed dict, or of each dict in an allowed list."""
    if isinstance(value, dict):
        return [(f"[{key!r}]", options) for key, options in value.items()]
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return [(f"[{i}]{where}", options) for i, v in enumerate(value) for where, options in _dict_options(v)]
    return []


def malformed_answer(task: Task) -> list[str]:
    """Why a tools task's possible answer (BFCL's form: each parameter's allowed values, ``""`` for
    "may be left out") is malformed, so that no right call passes it (the audit reports them as one
    ``answer_malformed`` problem: the task is unverifiable).

    Found in BFCL's own data: a plain value where a list of allowed ones belongs (simple_java_64's
    ``{"format": "epoch_millis"}``: BFCL's checker reads the text as its characters and rejects the
    right answer), a required parameter allowed only ``""`` or nothing at all, a parameter the
    function does not declare, a required one the answer lacks; and, for ``bfcl:`` tasks, the call
    made of the answer's own first values (the reference) rejected by BFCL's rules (simple_java_36,
    _65: numbers in a list whose items are declared text, which BFCL's converter reads as text)."""
    problems: list[str] = []
    tests = [t.expected for t in task.tests if isinstance(t.expected, dict) and "calls" in t.expected]
    if task.form != "tools" or task.api is not None or not tests:
        return problems
    for expected in tests:
        schemas = expected.get("schemas", {})
        for want in expected["calls"]:
            for name, answer in want.items():
                schema = schemas.get(name, {})
                properties, required = schema.get("properties", {}), schema.get("required", [])
                problems += [
                    f"{name}: the answer lacks the required parameter {p!r}" for p in required if p not in answer
                ]
                for param, allowed in answer.items():
                    if not isinstance(allowed, list):
                        problems.append(f"{name}.{param}: its allowed values {allowed!r} are not a list")
                        continue
                    if param not in properties and "" not in allowed:
                        problems.append(f"{name}.{param}: the function declares no such parameter")
                    if param in required and all(a == "" for a in allowed):
                        problems.append(f"{name}.{param}: a required parameter allowed {allowed or 'no value'}")
                    problems += [
                        f"{name}.{param}{where}: its allowed values {options!r} are not a list (BFCL's checker "
                        "iterates them: text as its characters)"
                        for value in allowed
                        for where, options in _dict_options(value)
                        if not isinstance(options, list)
                    ]
    if not problems and task.metadata.source.startswith("bfcl:") and task.reference is not None:
        for expected in tests:
            ok, why = check_calls(parse_calls(task.reference), expected, "bfcl")
            if not ok:
                problems.append(f"the call made of its own allowed values fails BFCL's checker: {why}")
    return problems


async def failing_gold_call(task: Task, sandbox: SandboxAPI) -> str | None:
    """A multi-turn API task's first gold call that raises or names a tool not offered at its turn
    (a gold that cannot be followed with what the model is shown), or None."""
    try:
        turns = gold_turns(task)
    except ValueError as e:
        raise InvalidTask(str(e)) from None
    run = await run_api_calls(task, turns, sandbox, observe_from=0)
    if run.infrastructure_error is not None or run.problem is not None:
        return run.problem
    texts = iter(run.observations())
    for i, turn in enumerate(turns):
        for call in turn:
            text = next(texts, "")
            if text.startswith("Error during execution"):
                return f"turn {i}: {call['name']}: {text[:200]}"
    return None


def reference_mutants(task: Task, n: int, seed: int = 0) -> list[tuple[str, str]]:
    """Up to ``n`` (description, completion) mutants of the task's reference, each one line changed
    (``dojo.tasks.mutation``): a test suite that lets one pass would pay a model for wrong code.
    Function and assert tasks mutate the reference solution; repo tasks the fixed file, within the
    function the fix is in. Some mutants are equivalent (no test could tell); they are reported
    for a person to judge, as mutation testing does."""
    import random

    if not task.reference or n < 1:
        return []
    if task.form in ("function", "assert"):
        source, path, window = task.reference, None, None
    elif task.form == "repo" and task.workspace is not None:
        edits = parse_edits(task.reference)
        if len(edits) != 1 or edits[0].search is None or edits[0].path not in task.workspace.files:
            return []
        path = edits[0].path
        buggy = task.workspace.files[path]
        if buggy.count(edits[0].search) != 1:
            return []
        source = buggy.replace(edits[0].search, edits[0].replace, 1)
        line = buggy[: buggy.index(edits[0].search)].count("\n") + 1  # where the fixed block starts
        window = enclosing_function(source, line)
    else:
        return []
    found = [m for m in mutants(path or "reference.py", source) if window is None or window[0] <= m.line <= window[1]]
    chosen = sorted(random.Random(seed).sample(found, min(n, len(found))), key=lambda m: (m.line, m.mutated))
    out = []
    for m in chosen:
        text = apply_mutant(source, m)
        completion = format_edits({path: text}) if path else text
        out.append((f"line {m.line}: {m.original.strip()} -> {m.mutated.strip()}", completion))
    return out


def estimate_difficulty(task: Task) -> tuple[float | None, str]:
    """The source's difficulty when it has one; else from the reference's size (AST nodes, log
    scale: 10 nodes ~ 0.2, 100 ~ 0.6, 400+ ~ 1.0)."""
    if task.metadata.difficulty is not None:
        return task.metadata.difficulty, "source"
    if task.reference and task.form != "answer":
        try:
            nodes = sum(1 for _ in ast.walk(ast.parse(task.reference)))
        except SyntaxError:
            return None, "unknown"
        if isinstance(task.prompt, str) and task.reference.startswith(task.prompt):
            with contextlib.suppress(SyntaxError):  # HumanEval-style: count the solution, not the signature
                nodes -= sum(1 for _ in ast.walk(ast.parse(task.prompt + "    pass\n"))) - 2
        return round(min(1.0, math.log1p(max(nodes, 1)) / math.log1p(400)), 3), "reference size"
    return None, "unknown"


DUPLICATES_LISTED = 20  # per task in a report (tau2's telecom tasks each have 1,983)


def near_duplicates(tasks: list[Task], threshold: float = 0.85, num_perm: int = 64) -> dict[str, list[str]]:
    """Task id -> ids of tasks whose prompts are near-duplicates (Jaccard over word 3-grams). Tasks
    with the same prompt share one signature and one query (tau2's 2,285 telecom tasks have 5
    prompts: they differ in the state behind the ticket)."""
    lsh = MinHashLSH(threshold=threshold, num_perm=num_perm)
    by_text: dict[str, list[str]] = {}
    for t in tasks:
        text = "\n".join(t.api.turns) if t.api is not None else t.prompt_text()  # not the shared function docs
        by_text.setdefault(text, []).append(t.id)
    hashes: dict[str, MinHash] = {}
    for text, ids in by_text.items():
        words = text.lower().split()
        shingles = {" ".join(words[i : i + 3]) for i in range(max(1, len(words) - 2))}
        m = MinHash(num_perm=num_perm, seed=1)
        m.update_batch([s.encode() for s in shingles])
        hashes[text] = m
        for tid in ids:
            lsh.insert(tid, m)
    found: dict[str, list[str]] = {}
    for text, ids in by_text.items():
        similar = sorted(lsh.query(hashes[text]))
        for tid in ids:
            others = [o for o in similar if o != tid]
            if others:
                found[tid] = others
    return found


async def audit_tasks(
    tasks: list[Task],
    sandbox: SandboxAPI,
    *,
    repeats: int = 2,
    duplicate_threshold: float = 0.85,
    progress: Callable[[int], None] | None = None,
    mutants: int = 0,
) -> AuditReport:
    """Audit ``tasks``; see the module doc. ``progress`` is called with each finished task count.
    ``mutants``: grade up to that many one-line mutants of each reference (``reference_mutants``);
    those that pass are reported, and the report gives the set's mutation score."""
    if repeats < 1:
        raise InputError(f"repeats must be at least 1, got {repeats}")
    if mutants < 0:
        raise InputError(f"mutants must be 0 or more, got {mutants}")
    counts = collections.Counter(t.id for t in tasks)
    if twice := sorted(tid for tid, k in counts.items() if k > 1):
        raise InputError(f"task ids must be unique; given more than once: {', '.join(twice[:5])}")
    start = time.perf_counter()
    grader = Grader(sandbox)
    dups = near_duplicates(tasks, duplicate_threshold)
    done = 0
    scripts: dict[str, asyncio.Future[bytes | None]] = {}  # a shared script's file, by what its run depends on

    async def written_once(task: Task, script: str) -> bytes | None:
        """The file a document script of the audit's own writes, from one run per distinct script and
        run (``family:office``'s 1,000 headings-only candidates are 10 scripts); None when that run
        wrote none (each task's grading then runs it and reports why)."""
        assert task.document is not None
        limits = grader.limits or task.limits
        run_limits = limits.model_dump(mode="json") if limits is not None else None
        key = json.dumps([script, task.environment, task.document.path, task.document.max_bytes, run_limits])
        if key not in scripts:
            future: asyncio.Future[bytes | None] = asyncio.get_running_loop().create_future()
            scripts[key] = future
            try:
                content, _, _ = await fetch_document(task, extract_code(script, "python"), sandbox, limits)
            except BaseException:
                future.set_result(None)
                raise
            future.set_result(content)
        return await asyncio.shield(scripts[key])

    async def grade_trivial(task: Task, name: str, completion: str, known: dict[str, bytes]) -> Reward:
        """A trivial candidate graded; one whose output is known without a run (see
        ``constant_answers``, ``written_once``) is judged on that output by the same grading."""
        written = known.get(name)
        if written is None and name in HOLLOW and task.document is not None and task.document.path:
            written = await written_once(task, completion)
        if written is not None:
            return await grader.grade_written(task, completion, written)
        return await grader.grade(task, completion)

    async def judge(task: Task) -> TaskAudit:
        a = TaskAudit(id=task.id, form=task.form, source=task.metadata.source)
        a.difficulty, a.difficulty_source = estimate_difficulty(task)
        similar = dups.get(task.id, [])
        a.duplicates, a.duplicate_count = similar[:DUPLICATES_LISTED], len(similar)
        if similar:
            more = f" and {len(similar) - 3} more" if len(similar) > 3 else ""
            a.warnings.append(f"near_duplicate: {', '.join(similar[:3])}{more}")
        trivial = trivial_candidates(task)
        abstains = task.form == "tools" and any(
            isinstance(t.expected, dict) and t.expected.get("no_call") for t in task.tests
        )
        if not abstains and task.api is None:  # (an API task's "no call" is its empty answer)
            trivial.append(("empty", ""))  # a task answered by saying nothing has no empty candidate to fail
        t0 = time.perf_counter()
        refs: list[Reward] = []
        try:
            if task.form == "assert":
                check_program(task)  # the check code compiles, before anything runs
            if task.reference is None:
                a.problems.append("no_reference: the task has no reference solution to verify it with")
            else:
                refs = list(await asyncio.gather(*(grader.grade(task, task.reference) for _ in range(repeats))))
            a.reference_ms = round((time.perf_counter() - t0) * 1000 / max(1, repeats), 2) if refs else None
            known = constant_answers(task) if task.form == "analysis" else {}
            others = await asyncio.gather(*(grade_trivial(task, name, c, known) for name, c in trivial))
            if malformed := malformed_answer(task):
                a.problems.append(f"answer_malformed: {'; '.join(malformed)}")
            checks_results = task.api is not None and task.api.check == "each_turn"  # (tau2's gold tries and fails)
            if checks_results and (failed := await failing_gold_call(task, sandbox)) is not None:
                a.problems.append(f"gold_call_fails: {failed}")
        except InvalidTask as e:
            a.problems.append(f"invalid_check: {e}")
            a.status = "error"
            return a
        a.reference_rewards = [r.value for r in refs]
        infra = [r for r in [*refs, *others] if r.verdict == "infrastructure_error"]
        if infra:
            a.problems.append(f"infrastructure_error: {infra[0].error}")
        outcomes = {(r.verdict, r.passed, r.total) for r in refs if r.value is not None}
        if len(outcomes) > 1:
            a.problems.append("flaky: the reference's result differs between runs")
        elif outcomes and (bad := next(r for r in refs if r.value is not None)).verdict != "pass":
            if CANARY_FLAGS & set(bad.flags):
                a.problems.append(f"canary_passes_reference: {bad.error}")
            else:
                a.problems.append(f"reference_fails: {bad.verdict} {bad.passed}/{bad.total}: {(bad.error or '')[:200]}")
        if task.form == "repo":
            a.forge_odds = await asyncio.to_thread(forge_odds, task)  # (~0.1-1 s of CPU: the loop goes on)
            if a.forge_odds is None:
                a.warnings.append("no_canary: no scored test expects a value written out that canaries can change")
            elif a.forge_odds > COUNTING_ODDS_MAX:
                a.warnings.append(
                    f"counted_twin: a forger that ranks the copies by what the files write (how often the test "
                    f"file writes each value, the test's own body, a prior on numbers, the numbers the package's "
                    f"tests expect) expects {a.forge_odds:.2f} of the reward (a random pick: {1 / COPIES:.2f})"
                )
            if shown := shown_sites(task):
                a.warnings.append(f"canary_site_shown: what the bug computes shows the twin's value at {shown[0]}")
            for (name, _), r in zip(trivial, others, strict=True):
                if CANARY_FLAGS & set(r.flags):
                    a.problems.append(f"canary_passes_{name.replace(' ', '_')}: {r.error}")
        for (name, _), r in zip(trivial, others, strict=True):
            if r.verdict == "pass":
                a.trivial_passed.append(name)
            elif name in DO_NOTHING and r.value and not task.abstains:
                a.problems.append(f"do_nothing_earns: {name} earns {r.value:g} ({r.passed}/{r.total} checks hold)")
        if a.trivial_passed:
            message = f"trivial_passes: {', '.join(a.trivial_passed)} passes every test"
            if task.form == "answer":
                a.warnings.append(f"guessable: {', '.join(a.trivial_passed)} is the answer")
            else:
                a.problems.append(message)
        a.status = "error" if infra else ("unverifiable" if a.problems else "ok")
        if mutants and a.status == "ok":
            variants = reference_mutants(task, mutants)
            graded = await asyncio.gather(*(grader.grade(task, c) for _, c in variants))
            a.mutants_tried = sum(r.value is not None for r in graded)
            a.mutants_survived = [d for (d, _), r in zip(variants, graded, strict=True) if r.verdict == "pass"]
            if a.mutants_survived:
                a.warnings.append(f"weak_tests: {len(a.mutants_survived)} of {a.mutants_tried} mutants pass")
        return a

    async def one(task: Task) -> TaskAudit:
        nonlocal done
        audit = await judge(task)
        done += 1
        if progress:
            progress(done)
        return audit

    audits = list(await asyncio.gather(*(one(t) for t in tasks)))
    return AuditReport(tasks=audits, seconds=time.perf_counter() - start, repeats=repeats)
