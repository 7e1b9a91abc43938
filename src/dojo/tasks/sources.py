"""Task sources by name: one string says where a task set comes from.

- ``humaneval`` (assert form, 164 tasks) and ``humaneval:function`` (the convertible ones);
- ``reasoning_gym:chain_sum,gcd?n=20&level=3&seed=0`` (families listed in ``dojo.tasks.reasoning_gym``;
  ``reasoning_gym`` alone means all of them);
- ``family:expressions?n=100&seed=0&difficulty=0.2-0.8`` (procedural families);
- ``bfcl:simple_python?n=50&seed=0`` (the Berkeley Function Calling Leaderboard's single-turn
  categories, from the bfcl-eval wheel: ``dojo.tasks.bfcl``; its multi-turn ones, e.g.
  ``bfcl:multi_turn_base``, on simulated APIs: ``dojo.tasks.bfcl_multi_turn``);
- ``tau2:airline?n=10&seed=0`` (tau2-bench's customer-service tasks with a scripted user, checked on
  the final database and what the agent told the user: ``dojo.tasks.tau2``);
- ``intercode:bash`` (InterCode's bash tasks on its test file tree, graded against the gold command's
  output and file changes: ``dojo.tasks.intercode``);
- ``swe:toolz?context=function&n=20&seed=0`` (bugs injected into a real package: ``dojo.tasks.swe``);
- ``ifbench?n=50&seed=0`` (IFBench's prompts, judged by its own checkers: ``dojo.tasks.ifbench``);
- ``scicode:steps?n=10&seed=0`` (SciCode's dev problems, by step or whole (``scicode:problems``;
  ``scicode`` both), graded against the reference's values from a sandbox run: ``dojo.tasks.scicode``);
- a path or fsspec URL ending in ``.jsonl`` or ``.parquet``.

A source read from a package leaves out the tasks that no grader of ours can verify
(``data/unverifiable.json``: each with why, found by ``dojo tasks audit``; a gold that fails, or one
that doing nothing matches): ``all=1`` keeps them (to compare with the benchmark's own numbers).
"""

from __future__ import annotations

import functools
import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from dojo.tasks.bfcl import CATEGORIES, load_bfcl
from dojo.tasks.bfcl_multi_turn import KINDS, load_bfcl_multi_turn
from dojo.tasks.data_analysis import DataAnalysisFamily  # noqa: F401  (registers family:data_analysis)
from dojo.tasks.doc_analysis import DocAnalysisFamily  # noqa: F401  (registers family:doc_analysis)
from dojo.tasks.documents import DocumentFamily  # noqa: F401  (registers family:documents and family:office)
from dojo.tasks.families import family_names, generate_tasks
from dojo.tasks.files import load_tasks
from dojo.tasks.humaneval import load_humaneval
from dojo.tasks.ifbench import load_ifbench
from dojo.tasks.intercode import load_intercode
from dojo.tasks.model import Task
from dojo.tasks.ops import OpsFamily  # noqa: F401  (registers family:ops)
from dojo.tasks.reasoning_gym import load_reasoning_gym
from dojo.tasks.scene3d import SceneFamily  # noqa: F401  (registers family:scene3d)
from dojo.tasks.scicode import PARTS, load_scicode
from dojo.tasks.scientific import ScientificFamily  # noqa: F401  (registers family:scientific)
from dojo.tasks.sql_family import SqlFamily  # noqa: F401  (registers family:sql)
from dojo.tasks.swe import CONTEXTS, PACKAGES, load_swe
from dojo.tasks.tau2 import DOMAINS, load_tau2
from dojo.tasks.terminal import TerminalFamily  # noqa: F401  (registers family:terminal)

SOURCE_HELP = (
    "a task source is one of: humaneval, humaneval:function, reasoning_gym[:FAMILY,...][?n=20&level=2&seed=0], "
    f"family:NAME[?n=100&seed=0&difficulty=0.2-0.8] (families: {', '.join(family_names())}), "
    f"bfcl:CATEGORY[?n=50&seed=0&all=1] (categories: {', '.join(CATEGORIES + KINDS)}), "
    f"tau2:DOMAIN[?n=10&seed=0&all=1] (domains: {', '.join(DOMAINS)}), "
    "intercode:bash|sql[?n=10&seed=0&all=1], ifbench[?n=50&seed=0&all=1], "
    f"scicode[:{'|'.join(PARTS)}][?n=10&seed=0&all=1], "
    f"swe:PACKAGE[?context={'|'.join(CONTEXTS)}&n=20&seed=0] (packages: {', '.join(sorted(PACKAGES))}), "
    "or a .jsonl/.parquet file"
)


def _query(query: str) -> dict[str, str]:
    """A source's options (``n=5&seed=1``), the last of each name."""
    return {k: v[-1] for k, v in parse_qs(query, keep_blank_values=True).items()}


def _options(query: str, allowed: set[str]) -> dict[str, str]:
    opts = _query(query)
    unknown = set(opts) - allowed
    if unknown:
        raise ValueError(f"unknown option(s) {sorted(unknown)}; this source takes {sorted(allowed)}")
    return opts


TASK_FILE_SUFFIXES = (".jsonl", ".jsonl.gz", ".ndjson", ".parquet", ".pq")  # a source that names a task file


def canonical_source(spec: str) -> str:
    """One spelling of a source string, for telling whether two name the same tasks: a local task
    file as its absolute path (``t.jsonl``, ``./t.jsonl`` and ``/abs/t.jsonl`` are one file), the
    options of the others in key order (``?seed=1&n=5`` is ``?n=5&seed=1``); names themselves are
    left as typed."""
    spec = spec.strip()
    if spec.lower().endswith(TASK_FILE_SUFFIXES):
        return spec if "://" in spec else str(Path(spec).expanduser().resolve())
    head, mark, query = spec.partition("?")
    if not mark:
        return head
    opts = _query(query)
    return head + "?" + "&".join(f"{k}={opts[k]}" for k in sorted(opts))


MAX_N = 1_000_000  # tasks one source string may ask for (n=10000000 had generated for minutes, unasked)


def _int(opts: dict[str, str], key: str, default: int) -> int:
    try:
        value = int(opts.get(key, default))
    except ValueError:
        raise ValueError(f"option {key} must be an integer, got {opts[key]!r}") from None
    if key == "n" and not 0 <= value <= MAX_N:
        raise ValueError(f"option n must be from 1 to {MAX_N:,} (or 0 for all of a dataset), got {value}")
    return value


def _difficulty(raw: str) -> float | tuple[float, float]:
    """``0.5`` or a range ``0.2-0.8`` (numbers in any float spelling, ``1e-3`` too)."""
    try:
        return float(raw)
    except ValueError:
        pass
    for i, c in enumerate(raw):
        if c == "-" and i > 0 and raw[i - 1] not in "eE":
            try:
                return float(raw[:i]), float(raw[i + 1 :])
            except ValueError:
                continue
    raise ValueError(f"difficulty must be a number or a range like 0.2-0.8, got {raw!r}")


UNVERIFIABLE = Path(__file__).parent / "data" / "unverifiable.json"


@functools.cache
def known_unverifiable(source: str) -> dict[str, str]:
    """The tasks of ``source`` (``tau2:airline``) that no grader of ours can verify: id -> why (the
    file groups them by why)."""
    known: dict[str, list[dict[str, Any]]] = json.loads(UNVERIFIABLE.read_text())
    return {tid: group["why"] for group in known.get(source, []) for tid in group["tasks"]}


def _verifiable(source: str, opts: dict[str, str], load: Callable[[int | None, int], list[Task]]) -> list[Task]:
    """``load(n, seed)``'s tasks, less those known to be unverifiable (unless ``all=1``); ``n`` of
    them (all when 0), drawn by ``seed``."""
    n, seed = _int(opts, "n", 0), _int(opts, "seed", 0)
    known = {} if _int(opts, "all", 0) else known_unverifiable(source)
    if not known:
        return load(n or None, seed)
    tasks = [t for t in load(None, seed) if t.id not in known]
    return random.Random(seed).sample(tasks, min(n, len(tasks))) if n else tasks


def load_source(spec: str) -> list[Task]:
    """The tasks a source string names; ValueError saying what is accepted when it names nothing."""
    spec = spec.strip()
    lower = spec.lower()
    if lower.endswith(TASK_FILE_SUFFIXES):
        return load_tasks(spec)
    head, _, query = spec.partition("?")
    kind, _, arg = head.partition(":")
    if kind == "humaneval":
        _options(query, set())
        if arg not in ("", "assert", "function"):
            raise ValueError(f"humaneval comes as 'humaneval' or 'humaneval:function', not {spec!r}")
        return load_humaneval(arg or "assert")
    if kind in ("reasoning_gym", "rg"):
        opts = _options(query, {"n", "level", "seed"})
        families = [f for f in arg.split(",") if f] or None
        return load_reasoning_gym(
            families, n=_int(opts, "n", 20), level=_int(opts, "level", 2), seed=_int(opts, "seed", 0)
        )
    if kind == "family":
        opts = _options(query, {"n", "seed", "difficulty"})
        difficulty = _difficulty(opts.get("difficulty", "0-1"))
        return generate_tasks(arg, n=_int(opts, "n", 100), seed=_int(opts, "seed", 0), difficulty=difficulty)
    if kind == "bfcl":
        opts = _options(query, {"n", "seed", "all"})
        load_calls = load_bfcl_multi_turn if arg in KINDS else load_bfcl
        return _verifiable(head, opts, lambda n, seed: load_calls(arg, n=n, seed=seed))
    if kind == "tau2":
        opts = _options(query, {"n", "seed", "all"})
        return _verifiable(head, opts, lambda n, seed: load_tau2(arg, n=n, seed=seed))
    if kind == "intercode":
        opts = _options(query, {"n", "seed", "all"})
        return _verifiable(head, opts, lambda n, seed: load_intercode(arg, n=n, seed=seed))
    if kind == "ifbench":
        if arg:
            raise ValueError(f"ifbench takes no part name, only options: ifbench?n=50&seed=0, not {spec!r}")
        opts = _options(query, {"n", "seed", "all"})
        return _verifiable("ifbench", opts, lambda n, seed: load_ifbench(n=n, seed=seed))
    if kind == "scicode":
        opts = _options(query, {"n", "seed", "all"})
        return _verifiable("scicode", opts, lambda n, seed: load_scicode(arg, n=n, seed=seed))
    if kind == "swe":
        opts = _options(query, {"n", "seed", "context"})
        n = _int(opts, "n", 0)
        return load_swe(arg, context=opts.get("context", "function"), n=n or None, seed=_int(opts, "seed", 0))
    raise ValueError(f"unknown task source {spec!r}: {SOURCE_HELP}")
