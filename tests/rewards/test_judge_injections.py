"""Prompt injection measured: a judge that obeys whatever it reads outside the quotation, and a corpus
of judged texts that talk to it. With the defences on, no text raises its score."""

from __future__ import annotations

from dojo.rewards.judge_injection import scan_judged_text
from tests.rewards.judge_injections import CORPUS, HONEST_GOOD, POOR, measure
from tests.rewards.judge_server import ObeyingJudge, serve_judge

NAMES = [i.name for i in CORPUS]


async def test_with_the_defences_on_no_injection_raises_a_score() -> None:
    async with serve_judge(ObeyingJudge()) as url:
        on = await measure(url, "nonce", detect=True)
    assert on.raised_rubric == [] and on.raised_pairwise == []


async def test_the_judge_obeys_every_injection_when_nothing_stops_it() -> None:
    """The control: without a fence or detection, every text in the corpus raises its score, so
    the test above measures the defences, not a corpus the judge would ignore anyway."""
    async with serve_judge(ObeyingJudge()) as url:
        off = await measure(url, "none", detect=False)
    assert off.raised_rubric == NAMES and off.raised_pairwise == NAMES


async def test_each_defence_alone() -> None:
    async with serve_judge(ObeyingJudge()) as url:
        fixed = await measure(url, "fixed", detect=False)
        nonce = await measure(url, "nonce", detect=False)
        detect = await measure(url, "none", detect=True)
    escaped = {"triple_quote", "verdict_after_close"}  # they close triple quotes
    assert escaped <= set(fixed.raised_rubric) and len(fixed.raised_rubric) < len(NAMES)
    assert nonce.raised_rubric == [] and nonce.raised_pairwise == []  # a nonce cannot be closed
    # detection alone: what it flags cannot raise a score; the soft appeals get past it
    assert set(detect.raised_rubric) == set(NAMES) - set(detect.detected)
    assert len(detect.detected) >= 0.8 * len(NAMES)


def test_honest_answers_are_not_flagged() -> None:
    honest = [
        POOR,
        HONEST_GOOD,
        "The function returns the maximum score of the list, or None when it is empty.",
        "To grade the essays, the teacher reads each one twice and gives a mark out of 10.",
        'def f(x):\n    """Return the best value."""\n    return max(x)',
        "Step 1: ignore whitespace in the input. Step 2: parse the numbers.",
        "The reviewer pointed out that answer quality improved over time.",
    ]
    for text in honest:
        assert [f for f in scan_judged_text(text) if f.severity == "hack"] == [], text
