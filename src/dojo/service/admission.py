"""Admission control: a bounded number of requests in the service; beyond it, 429 at once."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from dojo.errors import DojoError, InputError


class Overloaded(DojoError):
    """The queue in front of the sandbox is full; the client should retry after ``retry_after`` s."""

    def __init__(self, retry_after: float) -> None:
        super().__init__(f"the sandbox queue is full; retry after {retry_after:.0f}s")
        self.retry_after = retry_after


class AdmissionQueue:
    """Counts requests admitted (running or waiting for a slot); refuses past ``capacity``.

    ``capacity`` is the slots plus the queue length. Refusing at once with Retry-After is what keeps
    latency bounded under overload, instead of every request timing out together.
    """

    def __init__(self, slots: int, queue: int, retry_after: float = 1.0) -> None:
        if slots < 1 or queue < 0:
            raise InputError("slots must be >= 1 and queue >= 0")
        self.slots = slots
        self.queue = queue
        self.capacity = slots + queue
        self.retry_after = retry_after
        self.admitted = 0
        self.rejected = 0

    def resize(self, slots: int) -> None:
        """The sandbox behind the queue now has ``slots`` slots (a fleet that met its nodes)."""
        self.slots = max(1, slots)
        self.capacity = self.slots + self.queue

    @property
    def waiting(self) -> int:
        return max(0, self.admitted - self.slots)

    @contextlib.contextmanager
    def admit(self, weight: int = 1) -> Iterator[None]:
        weight = max(1, min(weight, self.capacity))
        if self.admitted + weight > self.capacity:
            self.rejected += 1
            raise Overloaded(self.retry_after)
        self.admitted += weight
        try:
            yield
        finally:
            self.admitted -= weight
