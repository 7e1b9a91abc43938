"""Families for the worker processes' test (a worker loads them by their module's name, as it loads
any family): one whose generation fails, one that prints while it generates."""

from __future__ import annotations

import random

from dojo.tasks.families import register_family
from dojo.tasks.model import Task, TestCase


class FailingFamily:
    name = "failing_for_tests"

    def generate(self, rng: random.Random, difficulty: float) -> Task:
        raise ValueError(f"this family cannot make a task of difficulty {difficulty}")


class ChattyFamily:
    """Prints on stdout as it generates: a worker's tasks must not be mixed with it."""

    name = "chatty_for_tests"

    def generate(self, rng: random.Random, difficulty: float) -> Task:
        x = rng.randint(1, 99)
        print(f"making a task that returns {x}")
        tests = [TestCase(args=[], expected=x)]
        return Task(id="t", form="function", prompt=f"f() returns {x}", entry_point="f", tests=tests)


FAMILY = FailingFamily()
register_family(FAMILY)
