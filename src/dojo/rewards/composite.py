"""Multi-dimensional rewards: tests, rule checks, judges and static signals combined with weights.

    composite = CompositeGrader(Grader(sandbox), [
        Part("tests", Grader(sandbox), weight=0.6),            # hidden tests, or a document's rules
        Part("judge", JudgeGrader(config), weight=0.3, requires=("tests",)),   # counts only if tests pass
        Part("short", Signal(lambda text: float(len(text) < 2000)), weight=0.1),
    ])
    reward = await composite.grade(task, completion)

The reward is the weighted mean of the parts' values (a part whose ``requires`` did not all pass
counts 0, and is not even asked: a judge is not paid to score code that fails its tests). Each part
is reported in ``Reward.components`` (``<part>``, ``<part>.<its own component>``, ``<part>.gated``)
and so in the trajectory store's ``components`` column. Gates:

- a hack anywhere (a part's verdict ``hack`` or a ``hack:`` flag) makes the whole reward 0 with
  verdict ``hack`` (``hack_zeroes_all``; the parts are still reported);
- any part without a value (an infrastructure failure: the sandbox, the judge's endpoint) makes the
  whole reward ``None``: a sum that silently dropped a part would be a different reward;
- a reply the first part finds no answer in (verdict ``no_answer``) earns nothing from the other
  parts: doing nothing earns 0 (a negative part still counts).

``CompositeGrader`` is a ``Grader`` (its ``sandbox``, ``limits`` and ``stats`` are the base
grader's), so episodes, the scheduler and the trainers take it where they take a ``Grader``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from dojo.rewards.graders import Grader
from dojo.rewards.outcome import GradeVerdict, Reward
from dojo.tasks.model import Task


@runtime_checkable
class Scorer(Protocol):
    """Anything that grades a completion of a task into a ``Reward``."""

    async def grade(self, task: Task, completion: str, *, seed: int | None = None) -> Reward: ...


class Signal:
    """A static signal as a scorer: ``fn(completion) -> value in [0, 1]`` (length, format, style)."""

    def __init__(self, fn: Callable[[str], float], threshold: float = 1.0) -> None:
        self.fn = fn
        self.threshold = threshold

    async def grade(self, task: Task, completion: str, *, seed: int | None = None) -> Reward:
        value = float(self.fn(completion))
        return Reward(value=value, verdict="pass" if value >= self.threshold else ("partial" if value else "fail"))


@dataclass(frozen=True)
class Part:
    """One dimension of the reward: a scorer, its weight, and the parts that must pass for it to count."""

    name: str
    scorer: Scorer
    weight: float = 1.0
    requires: tuple[str, ...] = ()


def _hacked(reward: Reward) -> bool:
    return reward.verdict == "hack" or any(f.startswith("hack:") for f in reward.flags)


class CompositeGrader(Grader):
    """Grades with several parts and combines them (see the module doc)."""

    def __init__(self, base: Grader, parts: Sequence[Part], *, hack_zeroes_all: bool = True) -> None:
        super().__init__(base.sandbox, base.config, stats=base.stats)
        names = [p.name for p in parts]
        if not parts or len(set(names)) != len(names):
            raise ValueError(f"a composite needs parts with distinct names, got {names}")
        for p in parts:
            if p.weight < 0:
                raise ValueError(f"part {p.name}: a weight must be >= 0, got {p.weight}")
            if unknown := [r for r in p.requires if r not in names or names.index(r) >= names.index(p.name)]:
                raise ValueError(f"part {p.name} requires {unknown}: name parts listed before it")
        if sum(p.weight for p in parts) <= 0:
            raise ValueError("the parts' weights sum to 0")
        self.parts = list(parts)
        self.hack_zeroes_all = hack_zeroes_all

    async def _grade(self, task: Task, completion: str, seed: int | None) -> Reward:
        rewards: dict[str, Reward] = {}
        gated: set[str] = set()
        pending = list(self.parts)
        while pending:  # in waves: a part runs once the parts it requires have their rewards
            ready = [p for p in pending if all(r in rewards for r in p.requires)]
            pending = [p for p in pending if p not in ready]
            run = []
            for p in ready:
                if all(rewards[r].verdict == "pass" for r in p.requires):
                    run.append(p)
                else:
                    gated.add(p.name)
                    rewards[p.name] = Reward(
                        value=0.0, verdict="fail", error=f"gated: {', '.join(p.requires)} must pass"
                    )
            done = await asyncio.gather(*(p.scorer.grade(task, completion, seed=seed) for p in run))
            rewards.update({p.name: r for p, r in zip(run, done, strict=True)})
        return self.combine(rewards, gated)

    def combine(self, rewards: dict[str, Reward], gated: AbstractSet[str] = frozenset()) -> Reward:
        """The composite of the parts' rewards."""
        components: dict[str, float] = {}
        flags = sorted({f for r in rewards.values() for f in r.flags})
        for p in self.parts:
            r = rewards[p.name]
            if r.value is not None:
                components[p.name] = r.value
            components[f"{p.name}.gated"] = float(p.name in gated)
            components.update({f"{p.name}.{k}": v for k, v in r.components.items()})
        main = rewards[self.parts[0].name]
        failed = [p.name for p in self.parts if rewards[p.name].value is None]
        if failed:
            errors = "; ".join(f"{n}: {rewards[n].error}" for n in failed)
            return Reward(
                value=None,
                verdict="infrastructure_error",
                total=main.total,
                flags=flags,
                components=components,
                error=f"no reward from {', '.join(failed)} ({errors})",
            )
        hacked = [p.name for p in self.parts if _hacked(rewards[p.name])]
        if hacked and self.hack_zeroes_all:
            errors = "; ".join(f"{n}: {rewards[n].error}" for n in hacked if rewards[n].error)
            return Reward(
                value=0.0,
                verdict="hack",
                total=main.total,
                components=components,
                flags=flags,
                error=f"reward hacking found by {', '.join(hacked)}" + (f" ({errors})" if errors else ""),
            )
        weight = sum(p.weight for p in self.parts)
        value = sum(p.weight * (rewards[p.name].value or 0.0) for p in self.parts) / weight
        if main.verdict == "no_answer":  # (its length signal had paid an empty reply 0.14 of the module doc's mix)
            value = min(value, 0.0)
        verdicts = [rewards[p.name].verdict for p in self.parts]
        verdict: GradeVerdict = main.verdict
        if main.verdict == "pass" and any(v != "pass" for v in verdicts):
            verdict = "partial"
        return Reward(
            value=value,
            verdict=verdict,
            passed=main.passed,
            total=main.total,
            components=components,
            flags=flags,
            cases=main.cases,
            error=main.error,
        )
