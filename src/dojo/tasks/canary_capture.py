"""Runs in the sandbox, when a task's canaries are chosen: what the tree as given computes where a
test expects a value (``dojo.tasks.canaries.capture_text`` wraps each expected value in
``capture(index, value)``). Every comparison with it is appended to ``CAPTURED``, one line each:
the site's index, a tab, and the repr of what it was compared with; the comparison itself answers as
the plain value would. A canary must never expect what the bug computes: it would pass on the bug.

Standard library only (it runs in the task's environment, beside the package's tests)."""

from __future__ import annotations

from typing import Any

CAPTURED = "/box/.dojo/captured.txt"


class Captured:
    """An expected value that writes down what it is compared with."""

    def __init__(self, index: int, value: Any) -> None:
        self.index = index
        self.value = value

    def __eq__(self, other: object) -> bool:
        with open(CAPTURED, "a", encoding="utf-8") as f:
            f.write(f"{self.index}\t{other!r}\n".replace("\n", " ")[:-1] + "\n")
        return bool(other == self.value)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash(self.value)

    def __repr__(self) -> str:
        return repr(self.value)


def capture(index: int, value: Any) -> Captured:
    return Captured(index, value)
