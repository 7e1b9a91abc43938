"""The one verdict taxonomy used everywhere: library, HTTP API, rewards and metrics."""

from __future__ import annotations

from enum import StrEnum


class Verdict(StrEnum):
    ACCEPTED = "Accepted"
    WRONG_ANSWER = "WrongAnswer"
    RUNTIME_ERROR = "RuntimeError"
    COMPILE_ERROR = "CompileError"
    TIME_LIMIT_EXCEEDED = "TimeLimitExceeded"
    MEMORY_LIMIT_EXCEEDED = "MemoryLimitExceeded"
    OUTPUT_LIMIT_EXCEEDED = "OutputLimitExceeded"
    SANDBOX_ERROR = "SandboxError"


class LimitKind(StrEnum):
    """Which limit a run hit, when its verdict comes from a limit."""

    WALL_TIME = "wall_time"
    CPU_TIME = "cpu_time"
    MEMORY = "memory"
    OUTPUT = "output"
    FILE_SIZE = "file_size"
