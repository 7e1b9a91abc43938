"""Procedural task families: a Python interface for generating tasks, and dojo's own family.

A family is anything with a ``name`` and ``generate(rng, difficulty) -> Task``; register it with
``register_family`` and it becomes a source (``family:NAME?n=100&difficulty=0.5``). Generation
must depend only on ``rng`` so that a seed reproduces a task set.

``expressions``: find a Python expression in ``x`` from input/output examples. The prompt shows a
few examples and ends with ``def f(x):\\n    return ``; grading calls ``f`` on hidden inputs. The
difficulty (0..1) picks the expression's shape, from ``x + 3`` to ``(x * 3 + 1) % 7 - x``.

``arith``: the same kind of task sized for a tiny model trained on a CPU (``dojo train``'s
default). The examples always show ``f(0)``, ``f(1)`` and ``f(2)`` (plus one more), so the
constants can be read off them; the shapes go from ``x + 4`` to ``x * x * 3 - x``.

``identify``: which of sixteen small functions (``x + 1``, ``x * x``, ``abs(x)``, ``x % 3``, ...)
the examples show, from three small inputs chosen so that exactly one of the sixteen fits them.
Nothing is copied from the prompt: the skill is telling the functions apart, and a prompt is a new
combination of facts (``f(3) == 9``) a model has seen in other prompts. This is ``dojo train``'s
default: a tiny model can learn it on a CPU in minutes, and what it learns carries over to prompts
it never saw.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Protocol

from dojo.tasks.family_processes import Chunk, family_payload, generate_in_processes, worker_count
from dojo.tasks.model import Task, TaskMetadata, TestCase


class TaskFamily(Protocol):
    name: str

    def generate(self, rng: random.Random, difficulty: float) -> Task: ...


_REGISTRY: dict[str, TaskFamily] = {}


def register_family(family: TaskFamily) -> TaskFamily:
    if not family.name or "?" in family.name:
        raise ValueError(f"bad family name {family.name!r}")
    _REGISTRY[family.name] = family
    return family


def get_family(name: str) -> TaskFamily:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown task family {name!r}; known: {', '.join(sorted(_REGISTRY))}") from None


def family_names() -> list[str]:
    return sorted(_REGISTRY)


def generate_tasks(
    family: TaskFamily | str,
    n: int,
    seed: int = 0,
    difficulty: float | tuple[float, float] = (0.0, 1.0),
    workers: int | None = None,
) -> list[Task]:
    """``n`` tasks with ids ``<family>/<seed>/<i>``; ``difficulty`` a value or a (low, high) range.
    ``workers``: processes that generate side by side (``family_processes``; the same tasks in the
    same order); None: as many as pay for themselves, judged from the time of the first tasks (a
    family that a worker can load only: ``family_payload``); 1: this process alone."""
    fam = get_family(family) if isinstance(family, str) else family
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    if workers is not None and workers < 1:
        raise ValueError(f"workers must be at least 1 (or None: chosen by the cost of a task), got {workers}")
    low, high = difficulty if isinstance(difficulty, tuple) else (difficulty, difficulty)
    if not 0.0 <= low <= high <= 1.0:
        raise ValueError(f"difficulty must lie in [0, 1] (low <= high), got {difficulty}")
    tasks: list[Task] = []
    if workers is None:
        probe = min(n, PROBED_TASKS)
        tasks = generate_range(fam, range(1), seed, low, high)  # (the first pays the family's imports: not timed)
        start = time.perf_counter()
        tasks += generate_range(fam, range(1, probe), seed, low, high)
        remaining_s = (time.perf_counter() - start) / max(1, probe - 1) * (n - probe)
        workers = worker_count(remaining_s) if n > probe else 0
    payload = family_payload(fam) if workers > 1 and len(tasks) < n else None  # None: generated here
    if payload is not None:
        chunk = Chunk(fam.name, seed, float(low), float(high), len(tasks), n)
        return tasks + generate_in_processes(payload, chunk, workers)
    return tasks + generate_range(fam, range(len(tasks), n), seed, low, high)


PROBED_TASKS = 5  # generated first in this process, to judge whether workers pay for the rest


def generate_range(fam: TaskFamily, indices: range, seed: int, low: float, high: float) -> list[Task]:
    """The tasks of ``indices`` of a set (each from its own ``random.Random``, seeded by its index)."""
    tasks = []
    for i in indices:
        rng = random.Random(f"{fam.name}/{seed}/{i}")
        d = low if low == high else low + (high - low) * rng.random()
        task = fam.generate(rng, d)
        tasks.append(task.model_copy(update={"id": f"{fam.name}/{seed}/{i}"}))
    return tasks


# -- expressions ------------------------------------------------------------------------------

Shape = Callable[[random.Random], str]
_SHAPES: list[list[Shape]] = [
    [lambda r: f"x + {r.randint(1, 9)}", lambda r: f"x * {r.randint(2, 9)}", lambda r: f"x - {r.randint(1, 9)}"],
    [lambda r: f"x * {r.randint(2, 9)} + {r.randint(1, 9)}", lambda r: "x * x", lambda r: f"{r.randint(10, 30)} - x"],
    [lambda r: f"x * x + {r.randint(1, 9)}", lambda r: f"x % {r.randint(2, 7)}", lambda r: f"x // {r.randint(2, 5)}"],
    [
        lambda r: f"(x + {r.randint(1, 5)}) * (x - {r.randint(1, 5)})",
        lambda r: f"x * x * x - {r.randint(1, 9)}",
        lambda r: f"abs(x - {r.randint(2, 9)})",
    ],
    [
        lambda r: f"(x * {r.randint(2, 5)} + {r.randint(1, 5)}) % {r.randint(5, 11)} - x",
        lambda r: f"max(x, {r.randint(2, 9)}) * {r.randint(2, 4)}",
        lambda r: f"x * x % {r.randint(5, 13)}",
    ],
]


def difficulty_level(difficulty: float, levels: int) -> int:
    """The level (0 .. levels - 1) a difficulty in 0..1 falls in."""
    return min(levels - 1, int(difficulty * levels))


def _pick_shape(shapes: list[list[Shape]], rng: random.Random, difficulty: float) -> tuple[int, str]:
    level = difficulty_level(difficulty, len(shapes))
    return level, rng.choice(shapes[level])(rng)


def _value(expr: str, x: int) -> int:
    """Our own expression at ``x`` (built from our templates and integers, never a candidate's text)."""
    return int(eval(expr, {"abs": abs, "max": max}, {"x": x}))


def _expression_task(
    family: str,
    expr: str,
    level: int,
    levels: int,
    prompt: str,
    inputs: list[int],
    visible: int,
    values: dict[int, int] | None = None,
) -> Task:
    """A function task ``f(x) = expr``: the first ``visible`` inputs are shown, the rest hidden.
    ``values`` are ``expr``'s values where already known."""
    known = values or {}
    tests = [
        TestCase(args=[x], expected=known[x] if x in known else _value(expr, x), visible=i < visible)
        for i, x in enumerate(inputs)
    ]
    meta = TaskMetadata(
        source=f"family:{family}",
        difficulty=round(level / (levels - 1), 3),
        tags=["python", "expression", f"level{level + 1}"],
    )
    return Task(id=family, form="function", prompt=prompt, entry_point="f", tests=tests, reference=expr, metadata=meta)


class ExpressionFamily:
    """Guess the expression from examples; graded on hidden inputs (function form, entry ``f``)."""

    name = "expressions"

    def __init__(self, visible: int = 3, hidden: int = 8) -> None:
        self.visible, self.hidden = visible, hidden

    def generate(self, rng: random.Random, difficulty: float) -> Task:
        level, expr = _pick_shape(_SHAPES, rng, difficulty)
        inputs = rng.sample(range(-10, 21), self.visible + self.hidden)
        examples = "\n".join(f"f({x}) == {_value(expr, x)}" for x in inputs[: self.visible])
        prompt = f"# Complete f so that:\n{_indent(examples)}\ndef f(x):\n    return "
        return _expression_task(self.name, expr, level, len(_SHAPES), prompt, inputs, self.visible)


_ARITH_SHAPES: list[list[Shape]] = [
    [lambda r: f"x + {r.randint(1, 19)}", lambda r: f"x * {r.randint(2, 12)}"],
    [lambda r: f"x - {r.randint(1, 19)}", lambda r: f"{r.randint(1, 19)} - x"],
    [lambda r: f"x * {r.randint(2, 6)} + {r.randint(1, 15)}", lambda r: f"x * x + {r.randint(1, 15)}"],
    [lambda r: f"x * x * {r.randint(2, 6)}", lambda r: f"x * x - x * {r.randint(1, 9)}"],
]


class ArithmeticFamily:
    """An expression in ``x`` from examples at 0, 1, 2 and one more; graded on hidden inputs."""

    name = "arith"

    def __init__(self, hidden: int = 8) -> None:
        self.hidden = hidden

    def generate(self, rng: random.Random, difficulty: float) -> Task:
        level, expr = _pick_shape(_ARITH_SHAPES, rng, difficulty)
        shown = [0, 1, 2, rng.randint(3, 9)]
        hidden = rng.sample([x for x in range(-9, 21) if x not in shown], self.hidden)
        examples = "".join(f"# f({x}) == {_value(expr, x)}\n" for x in shown)
        prompt = f"{examples}def f(x):\n    return "
        return _expression_task(self.name, expr, level, len(_ARITH_SHAPES), prompt, shown + hidden, len(shown))


def _signed(expr: str, c: int) -> str:
    return f"{expr} + {c}" if c >= 0 else f"{expr} - {-c}"


_ARITH_READINGS: list[Callable[[int, int, int], str]] = [
    lambda f0, f1, f2: _signed("x", f0),
    lambda f0, f1, f2: f"x * {f1}",
    lambda f0, f1, f2: f"{f0} - x",
    lambda f0, f1, f2: _signed(f"x * {f1 - f0}", f0),
    lambda f0, f1, f2: _signed("x * x", f0),
    lambda f0, f1, f2: f"x * x * {f1}",
    lambda f0, f1, f2: f"x * x - x * {1 - f1}",
]


def arith_readings(task: Task) -> list[str]:
    """Every ``arith`` shape with its constants read off ``f(0)``, ``f(1)`` and ``f(2)``: one of
    them is right, the others match only some examples. Warm-start demonstrations for a tiny model
    (it learns to read constants; which shape the examples imply is left to reinforcement)."""
    shown = {t.args[0]: t.expected for t in task.tests if t.visible}
    if not {0, 1, 2} <= set(shown):
        raise ValueError(f"task {task.id!r} does not show f(0), f(1) and f(2); is it an arith task?")
    f0, f1, f2 = (int(shown[x]) for x in (0, 1, 2))
    by_values: dict[tuple[int, ...], str] = {}
    for reading in _ARITH_READINGS:
        expr = reading(f0, f1, f2)  # built from integers and our templates, never a candidate's text
        values = tuple(_value(expr, x) for x in range(-9, 21))
        by_values.setdefault(values, expr)  # one expression per function
    return list(by_values.values())


IDENTIFY_FUNCTIONS: list[list[str]] = [
    ["x + 1", "x * 2", "x * x", "-x"],
    ["x - 1", "x * 3", "x + 2", "x * x + 1"],
    ["x * x - x", "x * x * x", "abs(x)", "x // 2"],
    ["x % 3", "x * x + x", "max(x, 0)", "2 - x"],
]
_IDENTIFY_ALL = [f for level in IDENTIFY_FUNCTIONS for f in level]
_IDENTIFY_SHOWN = range(-4, 10)
_IDENTIFY_HIDDEN = range(-9, 21)
_IDENTIFY_VALUES = {f: {x: _value(f, x) for x in _IDENTIFY_HIDDEN} for f in _IDENTIFY_ALL}  # 20,000 tasks in ~1 s


class IdentifyFamily:
    """Which of :data:`IDENTIFY_FUNCTIONS` the three shown examples are from; graded on hidden inputs."""

    name = "identify"

    def __init__(self, shown: int = 3, hidden: int = 8) -> None:
        self.shown, self.hidden = shown, hidden

    def generate(self, rng: random.Random, difficulty: float) -> Task:
        level = difficulty_level(difficulty, len(IDENTIFY_FUNCTIONS))
        expr = rng.choice(IDENTIFY_FUNCTIONS[level])
        values = _IDENTIFY_VALUES[expr]
        while True:  # inputs whose outputs no other function of the set reproduces
            shown = rng.sample(_IDENTIFY_SHOWN, self.shown)
            outputs = [values[x] for x in shown]
            if all([_IDENTIFY_VALUES[other][x] for x in shown] != outputs for other in _IDENTIFY_ALL if other != expr):
                break
        hidden = rng.sample([x for x in _IDENTIFY_HIDDEN if x not in shown], self.hidden)
        examples = "".join(f"# f({x}) == {y}\n" for x, y in zip(shown, outputs, strict=True))
        prompt = f"{examples}def f(x):\n    return "
        return _expression_task(
            self.name, expr, level, len(IDENTIFY_FUNCTIONS), prompt, shown + hidden, self.shown, values
        )


IDENTIFY_CONFUSIONS: dict[str, str] = {
    a: b
    for x, y in [
        ("x + 1", "x - 1"),
        ("x * 2", "x + 2"),
        ("-x", "2 - x"),
        ("x * 3", "x * x * x"),
        ("x * x - x", "x * x + x"),
        ("x // 2", "x % 3"),
        ("max(x, 0)", "abs(x)"),
        ("x * x", "x * x + 1"),
    ]
    for a, b in ((x, y), (y, x))
}
"""Pairs of ``identify`` functions a careless solver mixes up: the mistakes of the ``confused``
warm-start demonstrator (dojo.train.data), which reinforcement has to unlearn."""


def family_confusion(task: Task) -> str | None:
    """The wrong answer a systematically mistaken solver gives to a task of a family that defines
    one (``identify``: :data:`IDENTIFY_CONFUSIONS`), else ``None``."""
    if task.metadata.source == "family:identify" and task.reference is not None:
        return IDENTIFY_CONFUSIONS.get(task.reference)
    return None


def family_candidates(task: Task) -> list[str] | None:
    """Plausible answers to a task of a family that has them (one of them right), else ``None``:
    warm-start demonstrations that teach the answer's form but leave the choice to reinforcement."""
    if task.metadata.source == "family:arith":
        return arith_readings(task)
    if task.metadata.source == "family:identify":
        return list(_IDENTIFY_ALL)
    return None


def _indent(text: str) -> str:
    return "\n".join(f"#   {line}" for line in text.splitlines())


register_family(ExpressionFamily())
register_family(ArithmeticFamily())
register_family(IdentifyFamily())
