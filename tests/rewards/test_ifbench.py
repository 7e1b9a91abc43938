"""ifbench: dojo's verdicts are IFBench's own (its evaluation function), instruction by instruction,
on responses that follow and that break each instruction."""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any

import pytest

from dojo.rewards import Grader
from dojo.rewards.audit import COMPLIANCE_CLAIM
from dojo.rewards.ifbench import MAX_RESPONSE_CHARS, follows, registry
from dojo.tasks import load_source
from dojo.tasks.ifbench import NEEDS_DOWNLOAD, ifbench_rows, sample_responses
from dojo.tasks.ifbench_build import PALINDROMES, PERSON_NAMES, build_response, numbered_sentences, prose
from dojo.tasks.model import Task
from dojo.tasks.sources import known_unverifiable

Kwargs = dict[str, Any]


def _first_words_swapped(text: str) -> str:
    words = text.split(" ")
    return " ".join([words[1], words[0], *words[2:]])


# For each instruction, a response that breaks it (most: its built response, changed just enough).
BREAKS: dict[str, Callable[[Kwargs, str, str], str]] = {
    "count:word_count_range": lambda kw, p, meets: prose(int(kw["max_words"]) + 1),
    "count:unique_word_count": lambda kw, p, meets: " ".join(["word"] * (int(kw["N"]) + 5)),
    "count:conjunctions": lambda kw, p, meets: prose(30),
    "count:person_names": lambda kw, p, meets: f"The team: {', '.join(PERSON_NAMES[: int(kw['N']) - 1])}.",
    "ratio:overlap": lambda kw, p, meets: prose(60),
    "count:numbers": lambda kw, p, meets: f"{meets} And 99.",
    "words:alphabet": lambda kw, p, meets: _first_words_swapped(meets),
    "words:vowel": lambda kw, p, meets: f"{meets} It is quite blue.",
    "words:consonants": lambda kw, p, meets: f"{meets} It is a sea.",
    "sentence:alliteration_increment": lambda kw, p, meets: f"{meets} The cat sat.",
    "words:palindrome": lambda kw, p, meets: ", ".join(PALINDROMES[:9]) + ".",
    "count:punctuation": lambda kw, p, meets: meets.replace("?!", "?"),
    "format:parentheses": lambda kw, p, meets: "The plan (step one [then two {then three}]) is complete.",
    "format:quotes": lambda kw, p, meets: "The guide wrote \"the sailor said 'land ahead' at dawn\" in the log.",
    "words:prime_lengths": lambda kw, p, meets: f"{meets} This word fails.",
    "format:options": lambda kw, p, meets: "none of these",
    "format:newline": lambda kw, p, meets: meets.replace("\n", " ", 1),
    "format:emoji": lambda kw, p, meets: f"{meets} The last sentence has none.",
    "ratio:sentence_words": lambda kw, p, meets: f"{meets} Four.",
    "count:words_japanese": lambda kw, p, meets: prose(3 * int(kw["N"])),
    "words:repeats": lambda kw, p, meets: " ".join(["again"] * (int(kw["small_n"]) + 1)),
    "sentence:keyword": lambda kw, p, meets: " ".join(numbered_sentences(int(kw["N"]) + 1, str(kw["word"]), 0)),
    "count:pronouns": lambda kw, p, meets: prose(int(kw["N"]) + 10),
    "words:odd_even_syllables": lambda kw, p, meets: "Strong sky crash.",
    "words:last_first": lambda kw, p, meets: f"{meets} Birds sing.",
    "words:paragraph_last_first": lambda kw, p, meets: f"{meets}\nThis line ends elsewhere.",
    "sentence:increment": lambda kw, p, meets: f"{meets} One two.",
    "words:no_consecutive": lambda kw, p, meets: f"{meets} Big bears bounce.",
    "format:line_indent": lambda kw, p, meets: f"{meets}\nBack at the margin.",
    "format:quote_unquote": lambda kw, p, meets: 'The old rule is "measure twice"',
    "format:list": lambda kw, p, meets: "Just one item.",
    "format:thesis": lambda kw, p, meets: meets.replace("<i>", "").replace("</i>", ""),
    "format:sub-bullets": lambda kw, p, meets: f"{meets}\n* A point without a detail",
    "format:no_bullets_bullets": lambda kw, p, meets: f"{meets}\nA sentence after the bullets.",
    "custom:multiples": lambda kw, p, meets: f"7, {meets}",
    "custom:mcq_count_length": lambda kw, p, meets: f"Here are the questions.\n{meets}",
    "custom:reverse_newline": lambda kw, p, meets: "\n".join(reversed(meets.splitlines())),
    "custom:word_reverse": lambda kw, p, meets: "The national symbol is the bald eagle.",
    "custom:sentence_alphabet": lambda kw, p, meets: _first_words_swapped(meets),
    "custom:european_capitals_sort": lambda kw, p, meets: ", ".join(reversed(meets.split(", "))),
    "custom:csv_city": lambda kw, p, meets: "\n".join(meets.splitlines()[:-1]),
    "custom:csv_special_character": lambda kw, p, meets: meets.replace('"Tools & Garden"', "Tools"),
    "custom:csv_quotes": lambda kw, p, meets: meets.replace('"', ""),
    "custom:date_format_list": lambda kw, p, meets: f"1700-01-01, {meets}",
    "count:keywords_multiple": lambda kw, p, meets: f"{meets} {kw['keyword1']}",
    "repeat:repeat_change": lambda kw, p, meets: str(kw["prompt_to_repeat"]),
    "repeat:repeat_simple": lambda kw, p, meets: "Only output this sentence.",
    "repeat:repeat_span": lambda kw, p, meets: f"{kw['prompt_to_repeat']} and more",
    "format:output_template": lambda kw, p, meets: meets.replace("Future Outlook:", "Outlook:"),
    "format:no_whitespace": lambda kw, p, meets: meets.replace(",", ", "),
    "ratio:sentence_balance": lambda kw, p, meets: f"{meets} One more.",
    "ratio:sentence_type": lambda kw, p, meets: f"{meets} Why not?",
}


def instructions(row: dict[str, Any]) -> list[tuple[str, Kwargs]]:
    """A row's instructions with their arguments, ``None`` ones left out (as dojo's tasks and
    IFBench's evaluation take them)."""
    kwargs = [{k: v for k, v in kw.items() if v is not None} for kw in row["kwargs"]]
    return list(zip(row["instruction_id_list"], kwargs, strict=True))


def responses(row: dict[str, Any], task: Task) -> dict[str, str]:
    """Responses to one prompt: the sample model's, its variants, the prompt itself, nothing, the
    task's reference, and for each instruction one built to meet it and one that breaks it."""
    prompt = row["prompt"]
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
    if task.reference is not None:
        out["reference"] = task.reference
    for instruction, kwargs in instructions(row):
        meets = build_response([(instruction, kwargs)], prompt)
        if meets is not None:
            out[f"meets {instruction}"] = meets
        out[f"breaks {instruction}"] = BREAKS[instruction](kwargs, prompt, meets or "")
    return out


def ifbench_verdicts(row: dict[str, Any], response: str) -> list[bool]:
    """IFBench's own strict verdict on each instruction of a row (its evaluation function)."""
    registry()  # IFBench's modules, imported with dojo's stand-ins (nothing downloaded)
    from ifbench.evaluation_lib import InputExample, test_instruction_following_strict

    example = InputExample(
        row["key"], list(row["instruction_id_list"]), row["prompt"], [dict(k) for k in row["kwargs"]]
    )
    return list(test_instruction_following_strict(example, {row["prompt"]: response}).follow_instruction_list)


async def test_dojo_agrees_with_ifbench_on_every_instruction() -> None:
    grader = Grader(sandbox=object())  # type: ignore[arg-type]  (text documents: nothing runs)
    tasks = {t.id: t for t in load_source("ifbench?all=1")}
    agree = differ = 0
    outcomes: dict[str, set[bool]] = collections.defaultdict(set)
    built: dict[str, set[str]] = collections.defaultdict(set)  # instruction -> "meets"/"breaks" IFBench agreed on
    for row in ifbench_rows():
        task = tasks.get(f"ifbench/{row['key']}")
        if task is None:
            assert any(i in NEEDS_DOWNLOAD for i in row["instruction_id_list"])
            continue
        for name, response in responses(row, task).items():
            theirs = ifbench_verdicts(row, response)
            reward = await grader.grade(task, response)
            ours = [c.passed for c in reward.cases] if reward.cases else [False] * len(theirs)
            for instruction, a, b in zip(row["instruction_id_list"], ours, theirs, strict=True):
                outcomes[instruction].add(b)
                agree += a == b
                differ += a != b
                assert a == b, (task.id, name, instruction, a, b)
                if name in (f"meets {instruction}", f"breaks {instruction}"):
                    assert b == name.startswith("meets"), (task.id, name, response)  # built as meant
                    built[instruction].add(name.split()[0])
    assert differ == 0 and agree > 3000
    supported = {i for r in ifbench_rows() for i in r["instruction_id_list"]} - set(NEEDS_DOWNLOAD)
    assert len(supported) == 52
    # every checker kind: a response built to meet it and one built to break it, both judged alike
    assert {i for i in supported if built[i] == {"meets", "breaks"}} == supported
    assert all(outcomes[i] == {True, False} for i in supported)


def test_references_follow_every_instruction_and_what_is_left_out_says_why() -> None:
    tasks = {t.id: t for t in load_source("ifbench?all=1")}
    assert len(tasks) == 265 and len(load_source("ifbench")) == 265 - 64
    known = known_unverifiable("ifbench")
    without = {tid for tid, t in tasks.items() if t.reference is None}
    assert without == {"ifbench/105", "ifbench/286"} and without <= set(known)
    assert "format:newline" in known["ifbench/105"] and "random" in known["ifbench/286"]
    sources = collections.Counter((t.metadata.model_extra or {}).get("reference_from") for t in tasks.values())
    assert sources == {"sample": 66, "built": 197, None: 2}
    trivially_followed = set()
    for row in ifbench_rows():  # every reference, by IFBench's own evaluation
        task = tasks.get(f"ifbench/{row['key']}")
        if task is None:
            continue
        if task.reference is not None:
            assert all(ifbench_verdicts(row, task.reference)), task.id
        if any(all(ifbench_verdicts(row, trivial)) for trivial in (row["prompt"], COMPLIANCE_CLAIM)):
            trivially_followed.add(task.id)
    # what the prompt given back or a one-line claim follows is left out, with why
    assert len(trivially_followed) == 37 + 25 and trivially_followed <= set(known)
    claimed = {tid for tid, why in known.items() if "claim" in why}
    assert len(claimed) == 25 and claimed <= trivially_followed
    with pytest.raises(ValueError, match="punkt"):
        follows("format:title_case", {}, "", "A Title")


def test_long_responses_are_refused_before_any_checker_reads_them() -> None:
    ok, why = follows("count:word_count_range", {"min_words": 1, "max_words": 10**7}, "", "word " * MAX_RESPONSE_CHARS)
    assert not ok and "longer than" in why
