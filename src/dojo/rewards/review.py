"""Spot checks of a judge: a review set drawn from a run, and human labels for its items, as JSONL.

A review set is a directory:

- ``items.jsonl``: one judged item per line, ``ReviewItem``: ``item_id`` (the episode id),
  ``run_id``, ``task_id``, ``question``, ``text`` (what was judged), ``judge_score`` (0..1) and
  ``judge_label`` (``pass`` when the score reaches the threshold, else ``fail``), ``component``
  (which reward component held the judge's score);
- ``labels.jsonl``: one label per line, ``Label``: ``item_id``, ``label`` (``pass``, ``fail``, or
  ``skip``: not labelled), ``labeller``, ``note``. Lines are appended; a labeller's last line for an
  item is their label. Labels made elsewhere (a spreadsheet, another tool) are written in the same
  form and given to ``dojo judge agreement --labels FILE``.

``draw(rows, rate, seed)`` picks judged rows of a trajectory store (rows whose ``components`` hold a
``judge`` score: ``judge`` itself, or ``<part>.judge`` inside a composite), each with probability
``rate``, reproducibly for a seed.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from dojo.errors import InputError, field_problems
from dojo.user_files import read_user_text

ITEMS = "items.jsonl"
LABELS = "labels.jsonl"
SKIP = "skip"


class ReviewItem(BaseModel):
    """One judged item to check by hand."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    item_id: str
    run_id: str = ""
    task_id: str = ""
    question: str = ""
    text: str
    judge_score: float = Field(ge=0, le=1)
    judge_label: str
    component: str = "judge"


class Label(BaseModel):
    """One person's (or tool's) label of one item."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    item_id: str = Field(min_length=1)
    label: str = Field(min_length=1, description="pass, fail (or a label of the review's own set), or skip.")
    labeller: str = Field("human", min_length=1)
    note: str = ""


def judge_component(components: dict[str, float]) -> str | None:
    """The component that holds a judge's score: ``judge``, else the first ``<part>.judge``."""
    if "judge" in components:
        return "judge"
    return next((k for k in sorted(components) if k.endswith(".judge")), None)


def _question(prompt_json: str | None) -> str:
    try:
        messages = json.loads(prompt_json or "[]")
    except ValueError:
        return ""
    return "\n\n".join(str(m.get("content", "")) for m in messages if isinstance(m, dict) and m.get("role") == "user")


def draw(rows: Iterable[dict[str, Any]], rate: float, *, seed: int = 0, threshold: float = 0.5) -> list[ReviewItem]:
    """Judged rows of a store, each drawn with probability ``rate`` (see the module doc)."""
    if not 0 < rate <= 1:
        raise InputError(f"--rate must be in (0, 1], got {rate}")
    rng = random.Random(seed)
    items = []
    for row in rows:
        components = json.loads(row.get("components") or "{}")
        key = judge_component(components)
        if key is None or row.get("final") is None or rng.random() >= rate:
            continue
        score = min(1.0, max(0.0, float(components[key])))
        items.append(
            ReviewItem(
                item_id=str(row["episode_id"]),
                run_id=str(row.get("run_id") or ""),
                task_id=str(row.get("task_id") or ""),
                question=_question(row.get("prompt")),
                text=str(row["final"]),
                judge_score=score,
                judge_label="pass" if score >= threshold else "fail",
                component=key,
            )
        )
    return items


def _read_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    for n, line in enumerate(read_user_text(path).split("\n"), 1):  # (not splitlines: U+2028 is text in JSON)
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except (ValueError, RecursionError) as e:
            raise InputError(f"{path}:{n}: not JSON: {e}") from None
        if not isinstance(data, dict):
            raise InputError(f"{path}:{n}: a line must be a JSON object")
        yield n, data


def read_items(directory: Path) -> list[ReviewItem]:
    items = []
    for n, data in _read_jsonl(directory / ITEMS):
        try:
            items.append(ReviewItem.model_validate(data))
        except ValidationError as e:
            raise InputError(f"{directory / ITEMS}:{n}: {field_problems(e, 'line')[0]}") from None
    return items


def read_labels(path: Path) -> list[Label]:
    labels = []
    for n, data in _read_jsonl(path):
        try:
            labels.append(Label.model_validate(data))
        except ValidationError as e:
            raise InputError(
                f"{path}:{n}: {field_problems(e, 'line')[0]}; a label line is "
                '{"item_id": ..., "label": "pass"|"fail"|"skip", "labeller": ...}'
            ) from None
    return labels


def write_items(directory: Path, items: Iterable[ReviewItem]) -> int:
    directory.mkdir(parents=True, exist_ok=True)
    n = 0
    with (directory / ITEMS).open("w", encoding="utf-8") as f:
        for item in items:
            f.write(item.model_dump_json() + "\n")
            n += 1
    return n


def append_label(directory: Path, label: Label) -> None:
    with (directory / LABELS).open("a", encoding="utf-8") as f:
        f.write(label.model_dump_json() + "\n")


def latest(labels: Iterable[Label]) -> dict[tuple[str, str], str]:
    """Each (item, labeller)'s last label, skips left out."""
    out: dict[tuple[str, str], str] = {}
    for label in labels:
        if label.label == SKIP:
            out.pop((label.item_id, label.labeller), None)
        else:
            out[(label.item_id, label.labeller)] = label.label
    return out
