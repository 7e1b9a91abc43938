"""Admission control: a bounded number of requests in the service, and a bounded size of the answers
they may hold; beyond either, 429 at once.

An answer is built in the service's memory before it is sent. Its size is bounded by the request's
limits (``answer_bytes``): stdout and stderr at ``limits.output`` each, every byte a control
character (six bytes in JSON: ``\\u0000``), and each fetched file at ``limits.file_size`` in base64.
Unbounded, one ``/v1/batch`` of 128 cases printing 1 MiB of NUL on each stream made a 1.5 GiB
answer and raised the service's peak memory by 1.7 GB (1,024 such cases, the most a batch takes,
would need ~28 GB).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from dojo.errors import DojoError, InputError
from dojo.sandbox import Limits
from dojo.sandbox.limits import DEFAULT_COMPILE_LIMITS

ESCAPED = 6  # JSON bytes of one control byte of output (\u0000)
RESULT_OVERHEAD = 4096  # a result's other fields


def answer_bytes(limits: Limits, compile_limits: Limits | None = None, fetched: int = 0) -> int:
    """The most bytes one run's result can take in a JSON answer under these limits (its compile
    step's output included, at ``DEFAULT_COMPILE_LIMITS`` when none are given)."""
    compiled = compile_limits or DEFAULT_COMPILE_LIMITS
    files = fetched * (-(-limits.file_size // 3) * 4 + 512)
    return 2 * ESCAPED * (limits.output + compiled.output) + files + RESULT_OVERHEAD


class Overloaded(DojoError):
    """The queue in front of the sandbox is full; the client should retry after ``retry_after`` s."""

    def __init__(self, retry_after: float, why: str = "the sandbox queue is full") -> None:
        super().__init__(f"{why}; retry after {retry_after:.0f}s")
        self.retry_after = retry_after


class AdmissionQueue:
    """Counts requests admitted (running or waiting for a slot) and the answer bytes they may hold;
    refuses past ``capacity`` requests or ``answer_capacity`` bytes.

    ``capacity`` is the slots plus the queue length. Refusing at once with Retry-After is what keeps
    latency bounded under overload, instead of every request timing out together.
    """

    def __init__(self, slots: int, queue: int, retry_after: float = 1.0, answer_capacity: int = 1 << 62) -> None:
        if slots < 1 or queue < 0 or answer_capacity < 1:
            raise InputError("slots must be >= 1, queue >= 0 and answer_capacity >= 1")
        self.slots = slots
        self.queue = queue
        self.capacity = slots + queue
        self.retry_after = retry_after
        self.answer_capacity = answer_capacity
        self.admitted = 0
        self.admitted_bytes = 0
        self.rejected = 0

    def resize(self, slots: int) -> None:
        """The sandbox behind the queue now has ``slots`` slots (a fleet that met its nodes)."""
        self.slots = max(1, slots)
        self.capacity = self.slots + self.queue

    @property
    def waiting(self) -> int:
        return max(0, self.admitted - self.slots)

    @contextlib.contextmanager
    def admit(self, weight: int = 1, answer: int = 0) -> Iterator[None]:
        """Hold ``weight`` places and ``answer`` bytes of answers (``answer_bytes``) for the block."""
        weight = max(1, min(weight, self.capacity))
        answer = min(answer, self.answer_capacity)
        if self.admitted + weight > self.capacity:
            self.rejected += 1
            raise Overloaded(self.retry_after)
        if self.admitted_bytes + answer > self.answer_capacity:
            self.rejected += 1
            raise Overloaded(self.retry_after, "the answers in the making would pass the service's memory for them")
        self.admitted += weight
        self.admitted_bytes += answer
        try:
            yield
        finally:
            self.admitted -= weight
            self.admitted_bytes -= answer
