"""Admission control: a bounded number of requests in the service, and a bounded size of the answers
they may hold (``dojo.service.answers``); beyond either, 429 at once."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from dojo.errors import DojoError, InputError


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

    def enter(self, weight: int = 1, answer: int = 0) -> Callable[[], None]:
        """Take ``weight`` places and ``answer`` bytes of answers (``answer_bytes``); the function
        that gives them back (once, however often it is called)."""
        weight = max(0, min(weight, self.capacity))  # (0: answer bytes only, a session's exec on its own slot)
        answer = min(answer, self.answer_capacity)
        if self.admitted + weight > self.capacity:
            self.rejected += 1
            raise Overloaded(self.retry_after)
        if self.admitted_bytes + answer > self.answer_capacity:
            self.rejected += 1
            raise Overloaded(self.retry_after, "the answers in the making would pass the service's memory for them")
        self.admitted += weight
        self.admitted_bytes += answer
        held = [True]

        def release() -> None:
            if held.pop() if held else False:
                self.admitted -= weight
                self.admitted_bytes -= answer

        return release

    @contextlib.contextmanager
    def admit(self, weight: int = 1, answer: int = 0) -> Iterator[None]:
        """Hold ``weight`` places and ``answer`` bytes of answers for the block."""
        release = self.enter(weight, answer)
        try:
            yield
        finally:
            release()
