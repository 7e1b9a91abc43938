"""What a rollout measured: pass@k, verdicts, tokens, time."""

from __future__ import annotations

import collections
import math
from collections.abc import Iterable, Sequence
from typing import Any


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one task from ``n`` samples of which ``c`` passed (Chen et al., 2021)."""
    if not 0 <= c <= n or k < 1:
        raise ValueError(f"need 0 <= c <= n and k >= 1 (n={n}, c={c}, k={k})")
    if k > n:
        raise ValueError(f"pass@{k} needs at least {k} samples per task, got {n}")
    if n - c < k:
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def summarise(rows: Iterable[dict[str, Any]], ks: Sequence[int] = (1,)) -> dict[str, Any]:
    """Summary over store rows (or dicts with the same keys): pass@k over complete groups, mean
    reward, status and verdict counts, tokens and time."""
    groups: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    statuses: collections.Counter[str] = collections.Counter()
    verdicts: collections.Counter[str] = collections.Counter()
    rewards: list[float] = []
    prompt_tokens = completion_tokens = 0
    wall = 0.0
    for row in rows:
        groups[row["group_id"]].append(row)
        statuses[row["status"]] += 1
        if row.get("verdict"):
            verdicts[row["verdict"]] += 1
        if row.get("reward") is not None:
            rewards.append(float(row["reward"]))
        prompt_tokens += int(row.get("prompt_tokens") or 0)
        completion_tokens += int(row.get("completion_tokens") or 0)
        wall += float(row.get("wall_seconds") or 0.0)
    out: dict[str, Any] = {
        "groups": len(groups),
        "episodes": sum(statuses.values()),
        "mean_reward": sum(rewards) / len(rewards) if rewards else None,
        "statuses": dict(statuses),
        "verdicts": dict(verdicts),
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "episode_seconds": wall,
    }
    for k in ks:
        scores = [
            pass_at_k(len(g), sum(r.get("verdict") == "pass" for r in g), k) for g in groups.values() if len(g) >= k
        ]
        out[f"pass@{k}"] = sum(scores) / len(scores) if scores else None
    return out
