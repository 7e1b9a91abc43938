"""ifbench: dojo's verdicts are IFBench's own (its evaluation function), instruction by instruction,
on responses that follow and that break each instruction."""

from __future__ import annotations

import collections
from typing import Any

import pytest

from dojo.rewards import Grader
from dojo.rewards.ifbench import MAX_RESPONSE_CHARS, follows, registry
from dojo.tasks import load_source
from dojo.tasks.ifbench import NEEDS_DOWNLOAD, ifbench_references, ifbench_rows, sample_responses


def responses(prompt: str, key: str) -> dict[str, str]:
    """Responses to one prompt: the sample model's, its variants, the prompt itself, nothing."""
    sample = sample_responses()[prompt]
    out = {
        "sample": sample,
        "upper": sample.upper(),
        "first 200 characters": sample[:200],
        "lines reversed": "\n".join(reversed(sample.splitlines())),
        "prompt echoed": prompt,
        "prompt twice": f"{prompt}\n\n{prompt}",
        "empty": "",
    }
    if key in ifbench_references():
        out["reference"] = ifbench_references()[key]
    return out


async def test_dojo_agrees_with_ifbench_on_every_instruction() -> None:
    registry()  # IFBench's modules, imported with dojo's stand-ins (nothing downloaded)
    from ifbench.evaluation_lib import InputExample, test_instruction_following_strict

    grader = Grader(sandbox=object())  # type: ignore[arg-type]  (text documents: nothing runs)
    tasks = {t.id: t for t in load_source("ifbench?all=1")}
    agree = differ = 0
    outcomes: dict[str, set[bool]] = collections.defaultdict(set)
    for row in ifbench_rows():
        task = tasks.get(f"ifbench/{row['key']}")
        if task is None:
            assert any(i in NEEDS_DOWNLOAD for i in row["instruction_id_list"])
            continue
        for name, response in responses(row["prompt"], str(row["key"])).items():
            theirs = test_instruction_following_strict(
                InputExample(
                    row["key"], list(row["instruction_id_list"]), row["prompt"], [dict(k) for k in row["kwargs"]]
                ),
                {row["prompt"]: response},
            ).follow_instruction_list
            reward = await grader.grade(task, response)
            ours = [c.passed for c in reward.cases] if reward.cases else [False] * len(theirs)
            for instruction, a, b in zip(row["instruction_id_list"], ours, theirs, strict=True):
                outcomes[instruction].add(b)
                agree += a == b
                differ += a != b
                assert a == b, (task.id, name, instruction, a, b)
    assert differ == 0 and agree > 2000
    supported = {i for r in ifbench_rows() for i in r["instruction_id_list"]} - set(NEEDS_DOWNLOAD)
    assert all(False in outcomes[i] for i in supported)  # every instruction broken at least once
    followed = {i for i in supported if True in outcomes[i]}
    assert len(followed) >= 32, sorted(supported - followed)


def test_references_follow_every_instruction_and_what_is_left_out_says_why() -> None:
    tasks = load_source("ifbench?all=1")
    assert len(tasks) == 265 and len(load_source("ifbench")) == 265 - 37
    with_reference = [t for t in tasks if t.reference is not None]
    assert len(with_reference) == 66
    for task in with_reference:
        for test in task.tests:
            e: dict[str, Any] = test.expected
            assert follows(e["instruction"], e.get("kwargs", {}), e.get("prompt", ""), task.reference or "")[0]
    with pytest.raises(ValueError, match="punkt"):
        follows("format:title_case", {}, "", "A Title")


def test_long_responses_are_refused_before_any_checker_reads_them() -> None:
    ok, why = follows("count:word_count_range", {"min_words": 1, "max_words": 10**7}, "", "word " * MAX_RESPONSE_CHARS)
    assert not ok and "longer than" in why
