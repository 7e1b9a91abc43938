"""Test doubles for policies: answers scripted by the test (the model's side of an episode)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from dojo.agent.policy import Completion, PolicyError, SamplingParams, ToolCall
from dojo.tasks.model import Task, TestCase

Reply = str | Completion | Exception


class ScriptedPolicy:
    """Replies from ``script(messages, call_number) -> text | Completion | exception to raise``.
    Records every conversation it was shown and how many calls ran at once."""

    def __init__(self, script: Callable[[list[dict[str, Any]], int], Reply], delay: float = 0.0) -> None:
        self.script = script
        self.delay = delay
        self.calls: list[list[dict[str, Any]]] = []
        self.offered: list[list[str]] = []  # the names of the tools passed with each call
        self.active = 0
        self.max_active = 0

    async def generate(
        self,
        messages: list[dict[str, Any]],
        params: SamplingParams,
        *,
        n: int = 1,
        tools: list[dict[str, Any]] | None = None,
    ) -> list[Completion]:
        self.calls.append([dict(m) for m in messages])
        self.offered.append([t["function"]["name"] for t in tools or []])
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        try:
            reply = self.script(messages, len(self.calls) - 1)
            if self.delay:
                await asyncio.sleep(self.delay)
            if isinstance(reply, Exception):
                raise reply
            if isinstance(reply, str):
                reply = Completion(text=reply, completion_tokens=max(1, len(reply) // 4))
            return [reply] * n
        finally:
            self.active -= 1


@contextlib.contextmanager
def served(policy: ScriptedPolicy) -> Iterator[str]:
    """``policy`` behind dojo's OpenAI-compatible server on loopback; yields its base URL."""
    import uvicorn

    from dojo.agent.policy_server import create_policy_app
    from tests.conftest import free_port

    app = create_policy_app(policy, "scripted")  # type: ignore[arg-type]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=free_port(), log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{server.config.port}/v1"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def fixed(*replies: Reply) -> ScriptedPolicy:
    """Replies in order, the last one repeated."""
    return ScriptedPolicy(lambda _m, i: replies[min(i, len(replies) - 1)])


def double_task(task_id: str = "double", visible: int = 2) -> Task:
    """f(x) == 2 * x: ``visible`` tests shown, 4 hidden."""
    xs = [1, 2, 3, 10, -4, 7][: visible + 4]
    return Task(
        id=task_id,
        form="function",
        prompt="# Complete f so that f(1) == 2 and f(2) == 4\ndef f(x):\n",
        entry_point="f",
        tests=[TestCase(args=[x], expected=2 * x, visible=i < visible) for i, x in enumerate(xs)],
    )


def answer_task(task_id: str = "sum") -> Task:
    return Task(id=task_id, domain="math", form="answer", prompt="What is 17 + 25?", tests=[TestCase(expected="42")],
                answer_match="numeric")  # fmt: skip


RIGHT = "```python\ndef f(x):\n    return 2 * x\n```"
WRONG = "```python\ndef f(x):\n    return x + 1\n```"  # right on f(1) only
# wrong on a shown f(1) only, right on every hidden test: partial credit (0.5 under the default
# mapping); WRONG, right on a shown test only, earns nothing (``shown_examples_only``)
PARTLY = "```python\ndef f(x):\n    return 0 if x == 1 else 2 * x\n```"
SPECIAL = "```python\ndef f(x):\n    return {1: 2, 2: 4}.get(x, 0)\n```"  # fits the visible tests only


def tool(name: str, **arguments: str) -> Completion:
    """A reply that makes one native tool call."""
    return Completion(
        text="", tool_calls=[ToolCall(id=f"c-{name}", name=name, arguments=arguments)], completion_tokens=5
    )


def broken(message: str = "connection refused") -> PolicyError:
    return PolicyError(message)
