"""Running calls on a ``tools`` task's simulated API (``Task.api``, BFCL's multi-turn categories) and
grading them by the API's state, outside the sandbox.

The program of every run (``dojo.rewards.programs.api_driver``) makes the task's API objects
(``_load_scenario`` with the task's config), then, turn by turn, calls the methods that the calls name with the calls'
arguments (JSON data, never evaluated), and after each turn reports the state of every object:
one SHA-256 per public attribute of a canonical JSON encoding of its value (objects by their
public attributes, sets sorted, a reference back to an object already encoded by its class name),
plus one SHA-256 per call's result (BFCL's text of it: a string, a dict as JSON, else ``str``),
marked ``error`` when the call failed (it raised, or named no tool it may call).
Only a tool offered at that turn, by its public name, can be called: ``_load_scenario``, private
attributes and anything that is not a method are refused, as are tools held back until a later
turn. The gold calls run the same way, in their own run, and the two reports are compared here.

BFCL's rule, turn by turn (a turn whose gold is empty is not checked, but its calls still run):
the candidate made at least one call in the turn; every object's state equals the gold's after
the turn; the results of the gold's calls of the turn are among the results of the candidate's
calls so far (as a multiset, in any order). The first turn that fails ends the check.
"""

from __future__ import annotations

import collections
import decimal
import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

from dojo.rewards.outcome import CaseOutcome
from dojo.rewards.programs import program_source
from dojo.sandbox import InputFile, Limits, Program, SandboxAPI, Verdict
from dojo.tasks.gold_calls import gold_turns
from dojo.tasks.model import ApiScenario, Task

API_GRADING_LIMITS = Limits(wall_time=30.0, cpu_time=20.0, memory=1 << 30)
SPEC = ".dojo-api.json"
RESULT_CHARS = 1 << 16  # the most of one call's result an observation carries


@dataclass
class ApiRun:
    """What one run of calls on a task's API reported (or why there is no report)."""

    turns: list[dict[str, Any]] = field(default_factory=list)
    infrastructure_error: str | None = None
    problem: str | None = None  # the run ended without a report (the API raised while loading, ...)

    def observations(self) -> list[str]:
        """The texts of the calls' results that the run was asked to show, in order."""
        return [r["text"] for t in self.turns for r in t["results"] if "text" in r]

    def errors(self, *, observed_only: bool = False) -> int:
        """How many of the calls failed (raised, or named no tool offered): tau2's tool errors;
        ``observed_only``: of the calls whose results the run was asked to show."""
        return sum(bool(r.get("error")) for t in self.turns for r in t["results"] if not observed_only or "text" in r)


def offered_names(task: Task, turn: int) -> list[str]:
    assert task.api is not None
    return [t["function"]["name"] for t in task.api.offered(task.tools, turn)]


def api_program(
    task: Task,
    turns: list[list[dict[str, Any]]],
    *,
    restrict: bool,
    observe_from: int | None = None,
    states: str = "each",
) -> Program:
    """The run that makes ``task``'s API and makes ``turns``' calls on it (``restrict``: only the
    tools offered at each turn; the gold is not restricted). ``observe_from``: the results of the
    calls from that index on (counted over all turns) come back as text too."""
    api = task.api
    assert api is not None
    spec = {
        "classes": api.classes,
        "modules": api.modules,
        "config": api.config,
        "stateless": api.stateless,
        "long_context": api.long_context,
        "observe_from": observe_from,
        "states": states,
        "turns": [
            {"calls": calls, "allowed": offered_names(task, i) if restrict else None} for i, calls in enumerate(turns)
        ],
    }
    return Program(
        language="python",
        source=program_source("api_driver"),  # the API objects, the calls turn by turn, a digest per turn
        args=[SPEC],
        files=[InputFile(path=SPEC, content=json.dumps(spec).encode())],
        environment=task.environment,
    )


async def run_api_calls(
    task: Task,
    turns: list[list[dict[str, Any]]],
    sandbox: SandboxAPI,
    limits: Limits | None = None,
    *,
    restrict: bool = True,
    observe_from: int | None = None,
    states: str | None = None,
) -> ApiRun:
    """Make ``turns``' calls on ``task``'s API in one sandbox run; its report, read here. ``states``:
    after which turns the state is reported (``each``, ``last``, ``none``; by default what the
    task's check needs)."""
    states = states or ("last" if scenario_of(task).check == "final_state" else "each")
    program = api_program(task, turns, restrict=restrict, observe_from=observe_from, states=states)
    result = await sandbox.run(program, limits or API_GRADING_LIMITS, cache_compiled=True)  # (the driver: ours)
    if result.verdict is Verdict.SANDBOX_ERROR:
        return ApiRun(infrastructure_error=result.sandbox_error or "sandbox error")
    if result.verdict is not Verdict.ACCEPTED:
        return ApiRun(problem=f"the API's run ended with {result.verdict.value}: {result.stderr[-300:]}")
    try:
        report = json.loads(result.stdout)
        reported = report["turns"]
        if not isinstance(reported, list) or len(reported) != len(turns):
            raise ValueError("one report per turn expected")
    except (ValueError, KeyError, TypeError) as e:
        return ApiRun(problem=f"the API's run gave no report: {e}")
    return ApiRun(turns=reported)


_GOLD_RUNS: collections.OrderedDict[str, ApiRun] = collections.OrderedDict()
GOLD_CACHE_SIZE = 4096


async def gold_run(task: Task, sandbox: SandboxAPI, limits: Limits | None = None) -> ApiRun:
    """The gold calls' run (remembered per scenario and gold: the APIs are deterministic, and a
    task is graded once per sample of its group). A run that failed is not remembered."""
    turns = gold_turns(task)
    key = hashlib.sha256(json.dumps([scenario_of(task).model_dump(), turns, task.environment],
                                    sort_keys=True).encode()).hexdigest()  # fmt: skip
    if key in _GOLD_RUNS:
        _GOLD_RUNS.move_to_end(key)
        return _GOLD_RUNS[key]
    run = await run_api_calls(task, turns, sandbox, limits, restrict=False)
    if run.infrastructure_error is None and run.problem is None:
        _GOLD_RUNS[key] = run
        while len(_GOLD_RUNS) > GOLD_CACHE_SIZE:
            _GOLD_RUNS.popitem(last=False)
    return run


def scenario_of(task: Task) -> ApiScenario:
    if task.api is None:
        raise ValueError(f"task {task.id} has no simulated API")
    return task.api


def candidate_turns(answer: Any, n_turns: int) -> tuple[list[list[dict[str, Any]]], str | None]:
    """A candidate's calls per turn from its answer (``{"turns": [[[call, ...] per step] per turn]}``
    or ``[[call, ...] per turn]``; a call ``{"name": ..., "arguments": {...}}``), padded with
    empty turns; and a problem when the answer is not of that shape."""
    turns = answer.get("turns") if isinstance(answer, dict) else answer
    if not isinstance(turns, list):
        return [[] for _ in range(n_turns)], "the answer holds no calls per turn"
    out: list[list[dict[str, Any]]] = []
    for turn in turns[:n_turns]:
        steps = turn if isinstance(turn, list) else []
        calls: list[dict[str, Any]] = []
        for step in steps:
            for call in step if isinstance(step, list) else [step]:
                if isinstance(call, dict) and isinstance(call.get("name"), str):
                    arguments = call.get("arguments", {})
                    calls.append({"name": call["name"], "arguments": arguments if isinstance(arguments, dict) else {}})
        out.append(calls)
    out += [[] for _ in range(n_turns - len(out))]
    return out, ("more turns than the task has" if len(turns) > n_turns else None)


def candidate_said(answer: Any) -> list[str]:
    """What the agent told the user: the answer's ``said`` texts (an episode's replies)."""
    said = answer.get("said") if isinstance(answer, dict) else None
    return [t for t in said if isinstance(t, str)] if isinstance(said, list) else []


def final_outcomes(say: list[str], said: list[str], mine: ApiRun, theirs: ApiRun) -> list[CaseOutcome]:
    """tau2's DB and COMMUNICATE rule: the state the conversation leaves equals the gold's (case 0),
    and each text of ``say`` appears in one of the agent's replies."""
    gold, got = theirs.turns[-1]["state"], mine.turns[-1]["state"]
    differ = sorted(
        f"{name}'s {a}" for name, attrs in gold.items() for a in attrs if got.get(name, {}).get(a) != attrs[a]
    )
    detail = f"{', '.join(differ[:5])} differ from what the request leads to" if differ else ""
    return [CaseOutcome(index=0, passed=not differ, detail=detail), *said_outcomes(say, said, 1)]


def state_digest(value: Any) -> str:
    """The digest the driver reports for a state value (``_state()``'s): of its canonical JSON."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def assertion_outcomes(
    asserts: list[Any], actions: list[dict[str, Any]], calls: list[list[dict[str, Any]]], mine: ApiRun
) -> list[CaseOutcome]:
    """tau2's ENV_ASSERTION (and ACTION) rule: the API's assertion functions, run in the sandbox on
    the final state (``assert_<i>`` of its ``_state()``), give the task's expected values (kept
    here); each required action is among the calls made (``action_matches``: tau2's comparison)."""
    got: dict[str, Any] = next(iter(mine.turns[-1]["state"].values()), {}) if mine.turns else {}
    outcomes = []
    for i, value in enumerate(asserts):
        ok = got.get(f"assert_{i}") == state_digest(value)
        outcomes.append(CaseOutcome(index=i, passed=ok, detail="" if ok else f"the final state fails check {i}"))
    made = [c for turn in calls for c in turn]
    for j, action in enumerate(actions, start=len(asserts)):
        ok = any(action_matches(action, c) for c in made)
        outcomes.append(
            CaseOutcome(index=j, passed=ok, detail="" if ok else f"{action['name']} was not called as needed")
        )
    return outcomes


def action_matches(action: dict[str, Any], call: dict[str, Any]) -> bool:
    """tau2's comparison of a required action with a call (``Action.compare_with_tool_call``): the
    same name, and the arguments of ``compare_args`` equal on both sides; with no ``compare_args``
    (None), those the call gives, so a call that gives none matches; with ``[]``, the name alone."""
    if call["name"] != action["name"]:
        return False
    given: dict[str, Any] = call["arguments"]
    names = action.get("compare_args")
    keys = set(given) if names is None else set(names)
    if not keys:
        return True
    wanted: dict[str, Any] = action.get("arguments", {})
    return {k: v for k, v in given.items() if k in keys} == {k: v for k, v in wanted.items() if k in keys}


TAU2_MAX_ERRORS = 10  # tau2's orchestrator ends a conversation once this many tool calls have failed,
TAU2_MAX_STEPS = 100  # or once it has taken this many steps; either end scores 0 (evaluate_simulation)


def conversation_steps(answer: Any, n_turns: int, *, solo: bool) -> int:
    """The steps tau2's orchestrator counts for the conversation an answer records: one per message
    (the user's, the agent's) and one per round of tool results. With a user: each turn is the
    user's message and the agent's reply (one per turn, or per reply said if more), the ``###STOP###``
    that ends it is one more, and each step of calls is the agent's message and its results; solo
    (telecom), the calls' steps and the agent's final message."""
    turns = answer.get("turns") if isinstance(answer, dict) else answer
    calls = 0
    for turn in turns if isinstance(turns, list) else []:
        steps = turn if isinstance(turn, list) else []
        calls += sum(1 for s in steps if isinstance(s, list) and s) + any(isinstance(s, dict) for s in steps)
    if solo:
        return 2 * calls + 1
    replies = max(n_turns, len(candidate_said(answer)))
    return 2 * calls + 2 * replies + 1


def tau2_cut_short(errors: int, steps: int) -> str | None:
    """Why tau2 would have ended the conversation before its end (and scored it 0), or None."""
    if errors >= TAU2_MAX_ERRORS:
        return f"{errors} tool calls failed: tau2 ends a conversation at {TAU2_MAX_ERRORS} (reward 0)"
    if steps >= TAU2_MAX_STEPS:
        return f"the conversation took {steps} steps: tau2 ends one at {TAU2_MAX_STEPS} (reward 0)"
    return None


MAX_REPLY_NUMBERS = 60  # distinct numbers in one reply beyond which it is a list of guesses, not an answer
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def said_outcomes(say: list[str], said: list[str], start: int) -> list[CaseOutcome]:
    """Each text of ``say`` appears in one of the agent's replies (case-insensitive, commas ignored:
    tau2's COMMUNICATE rule), a number as a number of its own, by value (``4`` is not in ``1234``
    nor in ``3.4``; ``327`` is in ``$327.00``), in a reply that names at most ``MAX_REPLY_NUMBERS``
    numbers. tau2's own substring rule paid a generic reply that could not have looked anything up
    (every 3-digit string in 1,002 digits, found by an adversary 2026-12-07: 1.0 on
    ``tau2:retail/24`` and ``airline/3``, where "Done, anything else?" scores 0)."""
    replies = [t.lower().replace(",", "") for t in said]
    replies = [r for r in replies if len(set(_NUMBER.findall(r))) <= MAX_REPLY_NUMBERS]
    outcomes = []
    for i, text in enumerate(say, start=start):
        told = any(_names(r, text.lower().replace(",", "")) for r in replies)
        detail = "" if told else "the user was not told something the request needs"
        outcomes.append(CaseOutcome(index=i, passed=told, detail=detail))
    return outcomes


def _names(reply: str, text: str) -> bool:
    """Whether ``reply`` holds ``text``: a number as a number in it of the same value, other text as
    tau2 finds it, with no digit running on where it starts or ends with one."""
    if not text:
        return True
    if _NUMBER.fullmatch(text):
        want = decimal.Decimal(text)
        return any(decimal.Decimal(n) == want for n in _NUMBER.findall(reply))
    before = r"(?<![\d.])" if text[0].isdigit() else ""
    after = r"(?!\.?\d)" if text[-1].isdigit() else ""
    return re.search(before + re.escape(text) + after, reply) is not None


def turn_outcomes(gold: list[list[str]], candidate: list[list[dict[str, Any]]], mine: ApiRun,
                  theirs: ApiRun) -> list[CaseOutcome]:  # fmt: skip
    """One outcome per checked turn (a turn with gold calls), by BFCL's rule; the turns after the
    first that fails fail too."""
    outcomes: list[CaseOutcome] = []
    results_so_far: list[str] = []
    failed_at: int | None = None
    for i, gold_turn in enumerate(gold):
        results_so_far += [r["sha256"] for r in mine.turns[i]["results"]]
        if not gold_turn:
            continue
        if failed_at is not None:
            outcomes.append(CaseOutcome(index=i, passed=False, detail=f"not reached: turn {failed_at} failed"))
            continue
        why = _turn_problem(candidate[i], mine.turns[i], theirs.turns[i], results_so_far)
        if why is not None:
            failed_at = i
        outcomes.append(CaseOutcome(index=i, passed=why is None, detail=why or ""))
    return outcomes


def _turn_problem(calls: list[dict[str, Any]], mine: dict[str, Any], gold: dict[str, Any],
                  results_so_far: list[str]) -> str | None:  # fmt: skip
    if not calls:
        return "no call was made in this turn"
    for name, attrs in gold["state"].items():
        got = mine["state"].get(name, {})
        differ = sorted(a for a in attrs if got.get(a) != attrs[a])
        if differ:
            return f"after this turn, {name}'s {', '.join(differ[:5])} differ from what the request leads to"
    left = list(results_so_far)
    for r in gold["results"]:
        if r["sha256"] in left:
            left.remove(r["sha256"])
        else:
            return "a result the request needs was never produced by a call"
    return None
