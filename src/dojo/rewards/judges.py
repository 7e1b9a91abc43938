"""``JudgeGrader``: a model scores what no test can decide, and the judge is measured while it does.

    judge = JudgeGrader(JudgeConfig(endpoint=JudgeEndpoint(base_url="http://127.0.0.1:8000/v1"),
                                    rubric=Rubric(criteria=[Criterion(name="correct", description=...)])))
    reward = await judge.grade(task, completion)   # Reward(value=0.75, components={"judge": 0.75, ...})
    pair = await judge.compare(question, first, second)   # both orders; a flip is a tie

- **Rubric** (``dojo.rewards.rubric``): criteria with weights and ordered levels, or yes/no checks;
  the reply must follow the rubric's JSON schema (sent as ``response_format``). A reply that does
  not parse is asked again (``parse_retries``); a judge that never answers in form, or an endpoint
  that fails (``JudgeUnavailable``), gives ``value=None`` and verdict ``infrastructure_error``:
  retry or drop the sample, never train on it as a 0.
- **The judged text is data** (``dojo.rewards.judge_prompt``): fenced by markers with a nonce drawn
  per request; ``detect`` scans it for attempts to talk to the judge (``dojo.rewards.judge_injection``)
  and a confirmed attempt scores 0 with a ``hack:injection_*`` flag, without asking the judge.
- **Samples**: ``samples`` verdicts per text (at a temperature above 0); the score is their mean,
  and ``judge_agreement`` (the share of sample pairs that agree, criterion by criterion) is a
  component of the reward: a judge that disagrees with itself is a judge to distrust.
- **Pairwise** (``compare``): both orders are asked; a verdict that changes with the order is a tie,
  and is counted (``JudgeStats.position_flips``).

A task may carry its own rubric in ``metadata.rubric`` (a ``Rubric`` as a dict); else the config's.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from dojo.rewards.judge_client import JudgeClient, JudgeContextFull, JudgeEndpoint, JudgeReplyCut, JudgeUnavailable
from dojo.rewards.judge_injection import scan_judged_text
from dojo.rewards.judge_prompt import Fence, briefer, pairwise_messages, question_of, rubric_messages
from dojo.rewards.outcome import GradeVerdict, Reward, RewardStats
from dojo.rewards.rubric import PAIRWISE_SCHEMA, Rubric, Winner, parse_pairwise
from dojo.tasks.model import Task

Side = Literal["first", "second", "tie"]


class JudgeConfig(BaseModel):
    """A judge: where it is served, what it checks, and the defences around it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    endpoint: JudgeEndpoint
    rubric: Rubric | None = Field(None, description="The rubric; a task's metadata.rubric takes its place.")
    samples: int = Field(1, ge=1, le=16, description="Verdicts per judged text (their mean is the score).")
    parse_retries: int = Field(2, ge=0, le=10, description="Asks again after a reply that does not parse.")
    fence: Fence = Field("nonce", description="How the judged text is quoted: nonce (default), fixed, none.")
    detect: bool = Field(True, description="Scan judged texts for injection attempts (a confirmed one scores 0).")
    purpose: str = Field("", description="Pairwise: what the answers are for, told to the judge.")
    max_text_chars: int = Field(
        40_000,
        ge=1,
        description="A judged text longer than this scores 0 without asking the judge: past its context the judge "
        "refused it, which left the answer without a reward (a policy could dodge its 0 by writing long).",
    )


@dataclass
class JudgeStats:
    """Counts over a judge's work: texts judged, failures, injections caught, pairwise flips."""

    judged: int = 0
    unavailable: int = 0
    unparsed_replies: int = 0
    cut_verdicts: int = 0  # verdicts past max_tokens even asked for short reasons: the text scored 0
    injections: int = 0
    pairs: int = 0
    position_flips: int = 0
    agreements: list[float] = field(default_factory=list)

    @property
    def flip_rate(self) -> float:
        return self.position_flips / self.pairs if self.pairs else 0.0

    def as_dict(self) -> dict[str, float]:
        agreement = sum(self.agreements) / len(self.agreements) if self.agreements else float("nan")
        return {
            "judge/judged": self.judged,
            "judge/unavailable": self.unavailable,
            "judge/unparsed_replies": self.unparsed_replies,
            "judge/cut_verdicts": self.cut_verdicts,
            "judge/injections": self.injections,
            "judge/pairs": self.pairs,
            "judge/position_flip_rate": self.flip_rate,
            "judge/self_agreement": agreement,
        }


@dataclass(frozen=True)
class PairVerdict:
    """A comparison asked in both orders. ``winner`` is ``tie`` when the orders disagree (``flipped``)."""

    winner: Side
    flipped: bool
    first_order: Winner  # the judge's answer with ``first`` shown as A
    second_order: Winner  # with ``second`` shown as A

    @property
    def value(self) -> float:
        """The first answer's reward: 1 it wins, 0.5 a tie, 0 it loses."""
        return {"first": 1.0, "tie": 0.5, "second": 0.0}[self.winner]


def sample_agreement(verdicts: Sequence[dict[str, dict[str, Any]]], rubric: Rubric) -> float:
    """The share of sample pairs that give a criterion the same answer, over all criteria (1.0 for one sample)."""
    if len(verdicts) < 2:
        return 1.0
    same = total = 0
    for c in rubric.criteria:
        scores = [c.score(v[c.name]) for v in verdicts]
        for x, y in itertools.combinations(scores, 2):
            same += x == y
            total += 1
    return same / total


class JudgeGrader:
    """Grades completions with a served judge (see the module doc). ``async with`` closes its client."""

    def __init__(
        self, config: JudgeConfig, *, stats: RewardStats | None = None, client: JudgeClient | None = None
    ) -> None:
        self.config = config
        self.client = client or JudgeClient(config.endpoint)
        self.stats = stats or RewardStats()
        self.judge_stats = JudgeStats()

    async def __aenter__(self) -> JudgeGrader:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self.client.aclose()

    def rubric_for(self, task: Task | None) -> Rubric:
        extra = (task.metadata.model_extra or {}) if task is not None else {}
        if extra.get("rubric") is not None:
            return Rubric.model_validate(extra["rubric"])
        if self.config.rubric is None:
            raise ValueError("this judge has no rubric: give JudgeConfig(rubric=...) or the task's metadata.rubric")
        return self.config.rubric

    async def grade(self, task: Task, completion: str, *, seed: int | None = None) -> Reward:
        """The rubric's score of ``completion`` as an answer to ``task``'s prompt."""
        reward = await self.judge(question_of(task.prompt), completion, self.rubric_for(task))
        self.stats.add(reward)
        return reward

    async def _ask(self, messages: list[dict[str, str]], schema: dict[str, Any], name: str, parse: Any) -> Any:
        """One parsed verdict: asked again after a reply that does not parse; ``JudgeUnavailable``
        after ``parse_retries`` more. A reply cut at ``max_tokens`` is asked again for shorter reasons
        (``briefer``); cut again, ``JudgeReplyCut``: the judged text drew a verdict longer than the
        judge may write (a text of many small errors, each named in the reason; at temperature 0 every
        retry was cut the same way and the text got no reward, found 2026-12-06)."""
        why = ""
        asked = messages
        tries = self.config.parse_retries + 1
        while tries > 0:
            tries -= 1
            text, cut = await self.client.ask_reply(asked, schema, name)
            try:
                return parse(text)
            except ValueError as e:
                self.judge_stats.unparsed_replies += 1
                why = str(e)
            if cut:
                if asked is not messages:
                    self.judge_stats.cut_verdicts += 1
                    raise JudgeReplyCut(
                        f"the judge's verdict did not fit its {self.client.endpoint.max_tokens} tokens, "
                        f"asked for short reasons too: {why}"
                    )
                asked = briefer(messages, self.client.endpoint.max_tokens)
                tries = max(tries, 1)  # (asked briefer once whatever the retries left)
        raise JudgeUnavailable(f"the judge never answered in the schema ({self.config.parse_retries + 1}+ asks): {why}")

    async def _fits(self, messages: list[dict[str, str]], schema: dict[str, Any], name: str) -> bool:
        """Whether the judge takes ``messages`` in (its reply unread): asked where a request with a
        judged text was refused for its length, with that text left empty, to tell whose length it
        was. A text too long for the judge's context is the text's fault and scores 0 (it had been
        an infrastructure error, a reward of None: a policy could dodge its 0 by writing long, past
        ``max_text_chars`` in tokens, which counts characters); a question and rubric too long are
        the judge's set-up. False on any failure (then the judge is unavailable)."""
        try:
            await self.client.ask(messages, schema, name)
        except JudgeUnavailable:
            return False
        return True

    def _injection(self, texts: Sequence[str]) -> tuple[list[str], str | None]:
        """Flags of the judged texts, and the confirmed attempt (None when there is none)."""
        if not self.config.detect:
            return [], None
        findings = [f for t in texts for f in scan_judged_text(t)]
        flags = sorted({f.flag() for f in findings})
        hacks = [f for f in findings if f.severity == "hack"]
        if not hacks:
            return flags, None
        self.judge_stats.injections += 1
        return flags, "; ".join(f"{f.kind} (line {f.line}): {f.detail}" for f in hacks[:3])

    async def judge(self, question: str, text: str, rubric: Rubric) -> Reward:
        """The rubric's score of ``text`` (see the module doc)."""
        self.judge_stats.judged += 1
        total = len(rubric.criteria)
        flags, hack = self._injection([text])
        if hack is not None:
            return Reward(
                value=0.0,
                verdict="hack",
                total=total,
                components={"judge": 0.0},
                flags=flags,
                error=f"the judged text talks to its judge: {hack}",
            )
        if not text.strip():
            return Reward(value=0.0, verdict="no_answer", total=total, components={"judge": 0.0}, error="empty text")
        if len(text) > self.config.max_text_chars:
            why = f"the judged text is longer than {self.config.max_text_chars} characters ({len(text)})"
            return Reward(value=0.0, verdict="fail", total=total, components={"judge": 0.0}, flags=flags, error=why)
        try:
            verdicts = await asyncio.gather(
                *(
                    self._ask(
                        rubric_messages(rubric, question, text, self.config.fence),
                        rubric.verdict_schema(),
                        rubric.name,
                        rubric.parse,
                    )
                    for _ in range(self.config.samples)
                )
            )
        except JudgeUnavailable as e:
            why = str(e) if isinstance(e, JudgeReplyCut) else ""
            if isinstance(e, JudgeContextFull) and await self._fits(
                rubric_messages(rubric, question, "", self.config.fence), rubric.verdict_schema(), rubric.name
            ):
                why = f"the judged text does not fit the judge's context (the question and rubric alone do): {e}"
            if why:
                return Reward(value=0.0, verdict="fail", total=total, components={"judge": 0.0}, flags=flags, error=why)
            self.judge_stats.unavailable += 1
            return Reward(value=None, verdict="infrastructure_error", total=total, flags=flags, error=str(e))
        scores = [rubric.score(v) for v in verdicts]
        score = sum(scores) / len(scores)
        agreement = sample_agreement(verdicts, rubric)
        self.judge_stats.agreements.append(agreement)
        components = {"judge": score, "judge_agreement": agreement}
        for c in rubric.criteria:
            components[f"judge:{c.name}"] = sum(c.score(v[c.name]) for v in verdicts) / len(verdicts)
        met = round(sum(rubric.met(v) for v in verdicts) / len(verdicts))
        verdict: GradeVerdict = "pass" if score >= rubric.pass_threshold else ("partial" if score > 0 else "fail")
        return Reward(value=score, verdict=verdict, passed=met, total=total, components=components, flags=flags)

    async def compare(self, question: str, first: str, second: str) -> PairVerdict:
        """Which of two answers is better, asked in both orders (``JudgeUnavailable`` when it cannot say).
        A confirmed injection attempt in one answer makes the other win without asking the judge."""
        _, hack_first = self._injection([first])
        _, hack_second = self._injection([second])
        if hack_first is not None or hack_second is not None:
            winner: Side = "tie" if hack_first and hack_second else ("second" if hack_first else "first")
            return PairVerdict(winner, False, "tie", "tie")
        ask = [
            self._ask(
                pairwise_messages(question, a, b, self.config.fence, self.config.purpose),
                PAIRWISE_SCHEMA,
                "pairwise",
                parse_pairwise,
            )
            for a, b in ((first, second), (second, first))
        ]
        try:
            one, two = await asyncio.gather(*ask)
        except JudgeUnavailable as e:
            if not isinstance(e, JudgeReplyCut):
                self.judge_stats.unavailable += 1
            raise
        self.judge_stats.pairs += 1
        as_first = {"A": "first", "B": "second", "tie": "tie"}[one]
        as_second = {"A": "second", "B": "first", "tie": "tie"}[two]
        flipped = as_first != as_second
        if flipped:
            self.judge_stats.position_flips += 1
        return PairVerdict("tie" if flipped else as_first, flipped, one, two)  # type: ignore[arg-type]

    async def grade_pairwise(self, task: Task, completion: str, reference: str) -> Reward:
        """``completion`` against ``reference``: 1 when it wins in both orders, 0.5 a tie or a flip, 0 a loss."""
        flags, hack = self._injection([completion])
        if hack is not None:
            reward = Reward(
                value=0.0,
                verdict="hack",
                components={"judge_pairwise": 0.0},
                flags=flags,
                error=f"the judged text talks to its judge: {hack}",
            )
        else:
            question = question_of(task.prompt)
            try:
                pair = await self.compare(question, completion, reference)
            except JudgeUnavailable as e:
                why = str(e) if isinstance(e, JudgeReplyCut) else ""  # (the answer's doing, as in judge())
                if isinstance(e, JudgeContextFull) and await self._fits(
                    pairwise_messages(question, "", reference, self.config.fence, self.config.purpose),
                    PAIRWISE_SCHEMA,
                    "pairwise",
                ):
                    why = f"the answer does not fit the judge's context (the reference alone does): {e}"
                if why:
                    reward = Reward(value=0.0, verdict="fail", total=1, components={"judge_pairwise": 0.0},
                                    flags=flags, error=why)  # fmt: skip
                else:
                    reward = Reward(value=None, verdict="infrastructure_error", flags=flags, error=str(e))
            else:
                verdict: GradeVerdict = "pass" if pair.winner == "first" else ("partial" if pair.value else "fail")
                reward = Reward(
                    value=pair.value,
                    verdict=verdict,
                    total=1,
                    passed=int(pair.winner == "first"),
                    components={"judge_pairwise": pair.value, "judge_position_flip": float(pair.flipped)},
                    flags=flags,
                )
        self.stats.add(reward)
        return reward
