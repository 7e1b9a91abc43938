"""A family whose generation fails, for the worker processes' test (a worker imports this module by
its name, as it imports any family's)."""

from __future__ import annotations

import random

from dojo.tasks.families import register_family
from dojo.tasks.model import Task


class FailingFamily:
    name = "failing_for_tests"

    def generate(self, rng: random.Random, difficulty: float) -> Task:
        raise ValueError(f"this family cannot make a task of difficulty {difficulty}")


FAMILY = FailingFamily()
register_family(FAMILY)
