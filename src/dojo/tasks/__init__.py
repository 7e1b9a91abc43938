"""Verifiable tasks: the model, files, sources (HumanEval, reasoning-gym, procedural families),
audit and curriculum.

    tasks = load_source("humaneval")
    save_tasks(tasks, "humaneval.parquet")
"""

from dojo.tasks.families import ExpressionFamily, TaskFamily, generate_tasks, register_family
from dojo.tasks.files import TaskFileError, load_tasks, save_tasks
from dojo.tasks.humaneval import load_humaneval
from dojo.tasks.model import Message, Task, TaskMetadata, TestCase
from dojo.tasks.reasoning_gym import load_reasoning_gym
from dojo.tasks.sources import load_source

__all__ = [
    "ExpressionFamily",
    "Message",
    "Task",
    "TaskFamily",
    "TaskFileError",
    "TaskMetadata",
    "TestCase",
    "generate_tasks",
    "load_humaneval",
    "load_reasoning_gym",
    "load_source",
    "load_tasks",
    "register_family",
    "save_tasks",
]
