"""The adversarial corpus (``hack_corpus``) against the grader with the static scan turned off:
the runtime alone must hold. Every hack, in both spellings, on ten HumanEval tasks in both forms
(and the helper redefinitions on the tasks whose checks use helpers), must score exactly 0."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from dojo.rewards import Grader, GradingConfig, scan_python
from dojo.sandbox import AsyncSandbox, Limits, Program
from dojo.tasks import Task, load_humaneval
from tests.rewards.hack_corpus import HACKS, NAIVE_HARNESS, Hack

COMMON = ("HumanEval/0", "HumanEval/2", "HumanEval/7", "HumanEval/10", "HumanEval/12",
          "HumanEval/13", "HumanEval/23", "HumanEval/28", "HumanEval/29", "HumanEval/35")  # fmt: skip
LIMITS = Limits(wall_time=2.0, cpu_time=1.0)


@pytest.fixture(scope="module")
def tasks() -> dict[str, Task]:
    return {t.id: t for t in load_humaneval("assert") + load_humaneval("function")}


def targets(hack: Hack, tasks: dict[str, Task]) -> list[Task]:
    if hack.tasks:
        return [tasks[i] for i in hack.tasks]
    return [tasks[i] for i in COMMON] + [tasks[f"{i}/function"] for i in COMMON]


def test_the_corpus_is_broad() -> None:
    families = Counter(h.family for h in HACKS)
    assert len(HACKS) >= 40 and len(families) >= 8, families
    assert len({h.name for h in HACKS}) == len(HACKS)
    assert len(COMMON) >= 10


@pytest.mark.parametrize("spelling", ["plain", "obfuscated"])
@pytest.mark.parametrize("hack", HACKS, ids=lambda h: h.name)
async def test_every_hack_scores_zero_with_the_scan_off(
    fast_sandbox: AsyncSandbox, tasks: dict[str, Task], hack: Hack, spelling: str
) -> None:
    grader = Grader(fast_sandbox, GradingConfig(scan=False, limits=LIMITS))
    chosen = targets(hack, tasks)
    items = [(t, getattr(hack, spelling)(t.entry_point or "")) for t in chosen]
    rewards = await grader.grade_many(items)
    won = {t.id: (r.value, r.verdict, r.error) for t, r in zip(chosen, rewards, strict=True) if r.value != 0.0}
    assert won == {}


async def test_the_corpus_tasks_references_still_score_one(fast_sandbox: AsyncSandbox, tasks: dict[str, Task]) -> None:
    chosen = {t.id: t for h in HACKS for t in targets(h, tasks)}
    rewards = await Grader(fast_sandbox, GradingConfig(scan=False, limits=LIMITS)).grade_many(
        [(t, t.reference or "") for t in chosen.values()]
    )
    assert [t for t, r in zip(chosen, rewards, strict=True) if r.value != 1.0] == []


@pytest.mark.parametrize("spelling", ["plain", "obfuscated"])
@pytest.mark.parametrize("hack", [h for h in HACKS if h.in_process], ids=lambda h: h.name)
async def test_in_process_hacks_win_against_a_same_process_harness(
    fast_sandbox: AsyncSandbox, hack: Hack, spelling: str
) -> None:
    """The control: each of these hacks does defeat a harness that shares its process, so its 0
    against dojo's harness is the defence holding, not a broken hack."""
    program = Program(
        language="python",
        source="ENTRY = 'probe_fn'\n" + NAIVE_HARNESS,
        files=[{"path": "solution.py", "content": getattr(hack, spelling)("probe_fn").encode()}],  # type: ignore[list-item]
    )
    r = await fast_sandbox.run(program, LIMITS)
    outcome = json.loads(r.stdout.strip().splitlines()[-1])
    assert outcome["passed"] > 0 or outcome["emitted"] > 0, (r.stdout[-500:], r.stderr[-1500:])


@pytest.mark.parametrize("hack", HACKS, ids=lambda h: h.name)
def test_the_scan_sees_through_the_obfuscated_spelling(hack: Hack) -> None:
    """Where the scan flags the plain spelling, it flags the obfuscated one too (a signal, not a
    defence: the tests above run without it)."""
    plain = scan_python(hack.plain("f"), "assert")
    if not plain:
        pytest.skip("the plain spelling has no static signature")
    assert scan_python(hack.obfuscated("f"), "assert")
