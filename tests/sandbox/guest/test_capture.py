"""One classifier of limits for both run paths (one-shot runs and a session's execs)."""

from __future__ import annotations

from typing import Any

from dojo.sandbox.guest.capture import classify_limit
from dojo.sandbox.guest.wire import RunLimits

LIM = RunLimits(
    wall_s=5.0,
    cpu_s=2.0,
    memory_bytes=100 << 20,
    output_bytes=1 << 20,
    processes=16,
    file_size_bytes=1 << 20,
    open_files=64,
)


def classify(cgroups: dict[str, int], limit: str | None = None, **facts: Any) -> str | None:
    base: dict[str, Any] = {"sig": None, "cpu": 0.1, "oom": False, "failed": False, "err": bytearray(), "max_rss": 0}
    return classify_limit(limit, LIM, memory_cgroup="memory" in cgroups, **{**base, **facts})


def test_limits_by_what_the_run_left() -> None:
    assert classify({}, "wall", sig=9, failed=True) == "wall"  # the zygote enforced it itself
    assert classify({}, sig=24, failed=True) == "cpu" and classify({}, cpu=2.5) == "cpu"
    assert classify({"memory": 3}, oom=True, sig=9, failed=True) == "memory"
    assert classify({}, sig=25, failed=True) == "file_size"
    assert classify({}, sig=11, failed=True) is None and classify({}) is None
    # without a memory cgroup (rootless), a failed run's own report or its size tells
    assert classify({}, failed=True, err=bytearray(b"MemoryError\n")) == "memory"
    assert classify({}, failed=True, max_rss=90 << 20) == "memory"
    assert classify({"memory": 3}, failed=True, max_rss=90 << 20) is None  # the cgroup would have said
    assert classify({}, failed=False, max_rss=90 << 20) is None  # a run that succeeded hit nothing
