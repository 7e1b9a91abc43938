"""Tasks for a training run: the training set, a held-out set that shares no prompt with it, and
warm-start demonstrations.

Held-out tasks are chosen by a hash of their prompt (``HELD_OUT_BUCKETS``), so no held-out prompt
is ever trained on, even when a procedural family repeats prompts across seeds.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable
from typing import get_args

from dojo.agent.hf_policy import render_text
from dojo.tasks.families import family_candidates, family_confusion, generate_tasks, get_family
from dojo.tasks.model import Task
from dojo.tasks.sources import load_source
from dojo.train.config import DemonstrationKind, TaskSettings

HELD_OUT_BUCKETS = 10  # one prompt in ten is reserved for evaluation


def held_out(task: Task) -> bool:
    digest = hashlib.sha256(task.prompt_text().encode()).digest()
    return int.from_bytes(digest[:4], "big") % HELD_OUT_BUCKETS == 0


def _dedupe(tasks: list[Task]) -> list[Task]:
    seen: set[str] = set()
    out = []
    for t in tasks:
        key = t.prompt_text()
        if key not in seen:
            seen.add(key)
            out.append(t)
    return out


def split_tasks(settings: TaskSettings, seed: int) -> tuple[list[Task], list[Task]]:
    """``(train, held_out)`` for a run. Families are generated (train from ``seed``, held-out from a
    fixed evaluation seed so every run is scored on the same tasks); other sources are split."""
    spec = settings.source.strip()
    if spec.startswith("family:") and "?" not in spec:
        family = get_family(spec.removeprefix("family:"))

        def first(n: int, seed: int, keep: Callable[[list[Task]], list[Task]], wanted: int, guess: int) -> list[Task]:
            """``keep(generate_tasks(family, n, seed))[:wanted]``, from a shorter prefix when it holds enough:
            a family's i-th task depends on i alone, and ``keep`` keeps a prefix's choice."""
            for size in (min(n, guess), n):
                chosen = keep(generate_tasks(family, size, seed=seed, difficulty=settings.difficulty))
                if len(chosen) >= wanted or size == n:
                    return chosen[:wanted]
            raise AssertionError("unreachable")

        # a tenth of prompts is held out, so ~1.1 tasks make a training task, and ~10 a held-out one (~9.5 in
        # `identify`, whose held-out prompts repeat): generating 40,000 + 8,000 tasks took ~9 s of each run
        n_train, n_test = settings.train_size, settings.held_out_size
        train = first(2 * n_train, seed, lambda ts: [t for t in ts if not held_out(t)], n_train, n_train * 5 // 4)
        test = first(40 * n_test, 10_007, lambda ts: _dedupe([t for t in ts if held_out(t)]), n_test, 12 * n_test)
    else:
        tasks = load_source(spec)
        train = [t for t in tasks if not held_out(t)]
        test = [t for t in tasks if held_out(t)]
        random.Random(seed).shuffle(train)
        train = train[: settings.train_size]
        test = test[: settings.held_out_size]
    if not train:
        raise ValueError(f"task source {spec!r} gave no training tasks")
    if not test:
        raise ValueError(
            f"task source {spec!r} gave no held-out tasks (one prompt in {HELD_OUT_BUCKETS} is held out): "
            "use a larger source"
        )
    return train, test


DEMONSTRATIONS: tuple[str, ...] = get_args(DemonstrationKind)
TEACHERS_WITH_MISTAKES = ("noisy", "confused", "hardcoded")  # wrong (1 - correct_share) of the time


def demonstrations(tasks: list[Task], kind: str, seed: int, correct_share: float = 1.0) -> list[dict[str, str]]:
    """Prompt/completion rows for the warm start. ``kind``:

    - ``reference``: the task's reference solution;
    - ``readings``: a random plausible answer of the task's family (it teaches the form only);
    - ``noisy``: the reference with probability ``correct_share``, otherwise another plausible answer;
    - ``confused``: the reference with probability ``correct_share``, otherwise the answer the family
      says a careless solver confuses it with (a teacher with systematic mistakes);
    - ``hardcoded``: the reference with probability ``correct_share``, otherwise the first visible
      example's expected output as a constant (a teacher that hard-codes the test it was shown).

    Tasks without plausible answers (or confusions) get the reference."""
    if kind not in DEMONSTRATIONS:
        raise ValueError(f"unknown demonstrations {kind!r}: use one of {', '.join(DEMONSTRATIONS)}")
    rng = random.Random(seed)
    rows = []
    for t in tasks:
        completion = t.reference
        if kind == "readings":
            completion = rng.choice(family_candidates(t) or [t.reference])
        elif kind in TEACHERS_WITH_MISTAKES and t.reference is not None and rng.random() >= correct_share:
            completion = _mistake(t, kind, rng) or t.reference
        if completion is None:
            continue
        rows.append({"prompt": t.prompt_text(), "completion": completion})
    if not rows:
        raise ValueError(
            "no warm-start demonstrations: the tasks have no reference solutions (set warm_start.steps: 0)"
        )
    return rows


def _mistake(task: Task, kind: str, rng: random.Random) -> str | None:
    """A wrong teacher's answer: another plausible answer (``noisy``), the family's fixed
    confusion (``confused``) or the first example's output (``hardcoded``); ``None`` where the
    task has none of these."""
    if kind == "noisy":
        others = [c for c in family_candidates(task) or [] if c != task.reference]
        return rng.choice(others) if others else None
    if kind == "hardcoded":
        return _hardcoded(task)
    return family_confusion(task)


def _hardcoded(task: Task) -> str | None:
    """The first visible example's expected output as a Python literal (function tasks whose
    expected value is a plain literal), else ``None``."""
    if task.form != "function":
        return None
    shown = next((t for t in task.tests if t.visible), None)
    if shown is None or not isinstance(shown.expected, int | float | str):  # bool is an int
        return None
    return repr(shown.expected)


def fix_candidates(tasks: list[Task], kind: str, seed: int, share: float) -> list[tuple[Task, str]]:
    """``(task, wrong reply)`` for about ``share`` of ``tasks``: the warm-start teacher's kind of
    mistake (``noisy`` for a teacher without mistakes), for the two-reply demonstrations of
    feedback episodes (``fix_demonstration``)."""
    rng = random.Random(seed + 1)
    mistake = kind if kind in TEACHERS_WITH_MISTAKES else "noisy"
    pairs = []
    for t in tasks:
        if t.reference is None or rng.random() >= share:
            continue
        wrong = _mistake(t, mistake, rng)
        if wrong is not None and wrong != t.reference:
            pairs.append((t, wrong))
    return pairs


def fix_demonstration(task: Task, wrong: str, feedback: dict[str, str], eos: str) -> dict[str, str]:
    """A two-reply demonstration, rendered as a feedback episode is (``render_text``): the prompt, a
    wrong reply ended by ``eos`` (as a sampled reply ends), the sandbox's feedback on it, and then,
    as the completion to learn, the reference."""
    assert task.reference is not None
    first = [*task.messages(), {"role": "assistant", "content": wrong}]
    head = render_text(first)
    rest = render_text([*first, feedback])[len(head) :]
    return {"prompt": head + eos + rest, "completion": task.reference}
