"""Rewards you can trust: graders that own the verdict, by task form, with reward-hack defences.

    grader = Grader(sandbox, GradingConfig(mode="fraction"))   # or Grader(sandbox): the defaults
    reward = await grader.grade(task, completion)   # Reward(value=1.0, verdict="pass", ...)

A sandbox failure gives ``value=None``: retry or drop the sample, never train on it as 0.
"""

from dojo.rewards.config import DEFAULT_GRADING, GradingConfig
from dojo.rewards.graders import (
    Grader,
    TestResults,
    candidate_code,
    grade_answer_task,
    grade_assert_task,
    grade_function_task,
    grade_stdio_task,
)
from dojo.rewards.hacks import Finding, scan_python
from dojo.rewards.harness import InvalidTask
from dojo.rewards.mapping import FormatBonus, LengthPenalty, RewardMode, correctness
from dojo.rewards.outcome import CaseOutcome, Reward, RewardStats
from dojo.sandbox.compare import stdout_matches
from dojo.tasks.values import decode_value, encode_value, values_equal

__all__ = [
    "DEFAULT_GRADING",
    "CaseOutcome",
    "Finding",
    "FormatBonus",
    "Grader",
    "GradingConfig",
    "InvalidTask",
    "LengthPenalty",
    "Reward",
    "RewardMode",
    "RewardStats",
    "TestResults",
    "candidate_code",
    "correctness",
    "decode_value",
    "encode_value",
    "grade_answer_task",
    "grade_assert_task",
    "grade_function_task",
    "grade_stdio_task",
    "scan_python",
    "stdout_matches",
    "values_equal",
]
