"""reasoning-gym generators as dojo tasks (offline: the generators ship in the PyPI package).

A chosen set spans arithmetic, algorithmic and code-reasoning families. Each family maps dojo's
difficulty *level* (1 easiest .. 5 hardest; ``metadata.difficulty = (level - 1) / 4``) onto the
generator's own knobs. Tasks are in *answer* form and are scored by the generator's own
``score_answer`` (exact credit only) on the one answer dojo extracts.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from dojo.tasks.model import Task, TaskMetadata, TestCase

SOURCE = "reasoning_gym"
ANSWER_INSTRUCTION = "\n\nGive only your final answer, inside <answer></answer> tags."

Knobs = Callable[[int], dict[str, Any]]

# family -> (domain, level -> generator config)
FAMILIES: dict[str, tuple[str, Knobs]] = {
    # arithmetic
    "chain_sum": ("math", lambda lv: {"min_terms": 2, "max_terms": 1 + lv, "min_digits": 1, "max_digits": lv}),
    "basic_arithmetic": ("math", lambda lv: {"min_terms": 2, "max_terms": 1 + lv, "min_digits": 1, "max_digits": lv}),
    "gcd": ("math", lambda lv: {"min_value": 1, "max_value": 10 ** (1 + lv)}),
    "lcm": ("math", lambda lv: {"min_value": 1, "max_value": 5 * 10 ** ((lv + 1) // 2)}),
    "prime_factorization": ("math", lambda lv: {"min_value": 2, "max_value": 10 ** (1 + lv)}),
    # algorithmic
    "number_sorting": ("algorithmic", lambda lv: {"min_numbers": 3, "max_numbers": 2 + 2 * lv}),
    "word_sorting": ("algorithmic", lambda lv: {"min_words": 3, "max_words": 2 + 2 * lv}),
    "spell_backward": ("algorithmic", lambda lv: {"min_word_len": 3, "max_word_len": min(10, 3 + 2 * (lv - 1))}),
    "letter_counting": ("algorithmic", lambda lv: {"min_words": 3, "max_words": 3 + 4 * lv}),
    "base_conversion": ("algorithmic", lambda lv: {"min_value": 0, "max_value": 10 ** (1 + lv)}),
    "count_bits": ("algorithmic", lambda lv: {"min_n": 1, "max_n": 2 ** (6 * lv) - 1}),
    # code reasoning
    "bf": ("code_reasoning", lambda lv: {"difficulty": min(3, 1 + (lv - 1) // 2)}),
    "list_functions": ("code_reasoning", lambda lv: {}),
    "codeio": ("code_reasoning", lambda lv: {}),
}


def _json_safe(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def load_reasoning_gym(families: list[str] | None = None, n: int = 20, level: int = 2, seed: int = 0) -> list[Task]:
    """``n`` tasks of each family at ``level`` (1-5), reproducible from ``seed``."""
    import reasoning_gym

    names = families or list(FAMILIES)
    unknown = [f for f in names if f not in FAMILIES]
    if unknown:
        raise ValueError(f"unknown reasoning-gym families {unknown}; dojo maps: {', '.join(sorted(FAMILIES))}")
    if not 1 <= level <= 5:
        raise ValueError(f"level must be 1..5, got {level}")
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    tasks: list[Task] = []
    for name in names:
        domain, knobs = FAMILIES[name]
        dataset = reasoning_gym.create_dataset(name, size=n, seed=seed, **knobs(level))
        for i in range(n):
            entry = dataset[i]
            rg_entry = _json_safe(
                {"question": entry["question"], "answer": entry["answer"], "metadata": entry.get("metadata", {})}
            )
            meta = TaskMetadata(
                source=SOURCE,
                difficulty=(level - 1) / 4,
                tags=[name, f"level{level}"],
                rg_dataset=name,
                rg_entry=rg_entry,
            )
            tasks.append(
                Task(
                    id=f"rg/{name}/L{level}/s{seed}/{i}",
                    domain=domain,
                    form="answer",
                    prompt=entry["question"] + ANSWER_INSTRUCTION,
                    tests=[TestCase(expected=str(entry["answer"]))],
                    reference=f"<answer>{entry['answer']}</answer>",
                    answer_match="reasoning_gym",
                    metadata=meta,
                )
            )
    return tasks
