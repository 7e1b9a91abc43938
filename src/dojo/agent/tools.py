"""The tools an agent may call during an episode, executed in the sandbox.

- ``run_code(code, stdin="")``: run a program in the task's language with the episode's files;
- ``run_tests(code)``: grade code against the task's *visible* tests only (hidden ones stay hidden);
- ``write_file(path, content)`` / ``read_file(path)``: the episode's own files, placed in every run;
- ``submit(code | answer)``: the final answer; the episode ends and the graders score it.

A ``repo`` task (a file tree to fix) has its own set, ``REPO_TOOL_NAMES``: ``run_shell(command)``
(bash in the tree with the edits so far: ``grep``, ``cat``, ``python -m pytest ...``),
``read_file``/``write_file``/``edit_file(path, search, replace)`` on the tree, ``run_tests()`` (the
visible tests, on the edited tree) and ``submit()`` (the edits are the answer).

Every observation is text for the model, cut to a budget (head and tail kept). A sandbox failure is
not an observation: ``ToolResult.infra_error`` is set and the episode is retried, never scored.
"""

from __future__ import annotations

import asyncio
import functools
import shlex
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from dojo.agent.policy import ToolCall
from dojo.agent.sandbox_clock import MeteredSandbox, SlotClock
from dojo.errors import InputError
from dojo.rewards.analysis import task_files
from dojo.rewards.config import GradingConfig
from dojo.rewards.graders import Grader
from dojo.rewards.outcome import RewardStats
from dojo.rewards.repo import REPO_GRADING_LIMITS, Edit, driver_output, format_edits, path_allowed, repo_program
from dojo.sandbox import ExecutionResult, InputFile, Limits, Program, SandboxAPI, Verdict
from dojo.sandbox.program import check_relative_path
from dojo.tasks.model import Task

TOOL_NAMES: tuple[str, ...] = ("run_code", "run_tests", "write_file", "read_file", "submit")
REPO_TOOL_NAMES: tuple[str, ...] = ("run_shell", "read_file", "edit_file", "write_file", "run_tests", "submit")

_SPECS: dict[str, dict[str, Any]] = {
    "run_code": {
        "description": "Run a program in the sandbox and see its output. Files you wrote are in the work dir.",
        "parameters": {
            "type": "object",
            "properties": {
                "code": {"type": "string", "description": "The program's source."},
                "stdin": {"type": "string", "description": "Text for standard input."},
            },
            "required": ["code"],
        },
    },
    "run_tests": {
        "description": "Check code against the task's visible tests; says which pass and why others fail.",
        "parameters": {
            "type": "object",
            "properties": {"code": {"type": "string", "description": "The complete solution."}},
            "required": ["code"],
        },
    },
    "write_file": {
        "description": "Write a text file into the work dir of every later run.",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
            "required": ["path", "content"],
        },
    },
    "read_file": {
        "description": "Read a file you wrote earlier.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    },
    "run_shell": {
        "description": "Run a bash command in the repository (its work dir), with your edits so far applied.",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string", "description": "e.g. grep -rn name pkg/ or pytest -x"}},
            "required": ["command"],
        },
    },
    "edit_file": {
        "description": "Replace the one occurrence of `search` in a file of the repository by `replace`.",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "search": {"type": "string"}, "replace": {"type": "string"}},
            "required": ["path", "search", "replace"],
        },
    },
    "submit": {
        "description": "Submit the final solution (code) or final answer (text). Ends the episode.",
        "parameters": {
            "type": "object",
            "properties": {"code": {"type": "string"}, "answer": {"type": "string"}},
        },
    },
}


def tool_specs(names: tuple[str, ...] | list[str] = TOOL_NAMES) -> list[dict[str, Any]]:
    """OpenAI ``tools`` entries for the named tools."""
    unknown = [n for n in names if n not in _SPECS]
    if unknown:
        raise ValueError(f"unknown tools {unknown}; choose from {sorted(_SPECS)}")
    return [{"type": "function", "function": {"name": n, **_SPECS[n]}} for n in names]


def tools_for(task: Task, names: tuple[str, ...] | list[str] | None = None) -> tuple[str, ...]:
    """The tools an episode on ``task`` offers: ``names`` when given, else the form's own set (a
    tools task's: its own functions, whose calls are its answer)."""
    if task.form == "tools":
        return tuple(t["function"]["name"] for t in task.tools)
    if names is not None:
        tool_specs(names)  # validates the names
        return tuple(names)
    return REPO_TOOL_NAMES if task.form == "repo" else TOOL_NAMES


def truncate_middle(text: str, budget: int) -> str:
    """``text`` if it fits, else its head and tail with a note of how much was cut."""
    if len(text) <= budget:
        return text
    head = budget * 2 // 3
    tail = budget - head
    return f"{text[:head]}\n... [{len(text) - head - tail} characters cut] ...\n{text[-tail:] if tail else ''}"


class ToolResult(BaseModel):
    """What one tool call did: the observation shown to the model and what the sandbox reported."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    call: ToolCall
    observation: str
    verdict: str | None = None
    exit_code: int | None = None
    wall_time: float = 0.0
    seconds: float = Field(0.0, description="Time the tool took, queueing for a sandbox slot included.")
    infra_error: str | None = None
    submitted: str | None = Field(None, description="submit: the text to grade.")
    tests_passed: int | None = Field(
        None, description="run_tests: the visible tests passed, as the grader counted them (None: they did not run)."
    )
    tests_total: int | None = Field(None, description="run_tests: the visible tests run (None: they did not run).")


@dataclass(frozen=True)
class VisibleCheck:
    """A completion graded on the visible tests: the observation shown to the model, the grade's
    verdict, the infrastructure error (the tests did not run), and the counts the grader made (None
    where they did not run). Per-turn rewards read the counts, never the observation's text, which
    a run's own output shares (``dojo.agent.turn_rewards``)."""

    observation: str
    verdict: str | None = None
    error: str | None = None
    passed: int | None = None
    total: int | None = None

    def tool_result(self, call: ToolCall) -> ToolResult:
        return ToolResult(call=call, observation=self.observation, verdict=self.verdict, infra_error=self.error,
                          tests_passed=self.passed, tests_total=self.total)  # fmt: skip


def submission_text(task: Task, call: ToolCall) -> str | None:
    """What a ``submit`` call of a task that is not a repo hands to the grader: its code as a code
    block, its answer in ``<answer>`` tags; None without either."""
    code, answer = call.arguments.get("code"), call.arguments.get("answer")
    if code is None and answer is None:
        return None
    if task.form == "answer":
        return f"<answer>{answer if answer is not None else code}</answer>"
    return f"```{task.language}\n{code if code is not None else answer}\n```"


class Toolbox:
    """Executes one episode's tool calls for one task. Holds the episode's files."""

    def __init__(
        self,
        task: Task,
        sandbox: SandboxAPI,
        *,
        tools: tuple[str, ...] | list[str] | None = None,
        limits: Limits | None = None,
        max_observation_chars: int = 2000,
        max_files: int = 32,
        max_file_bytes: int = 1 << 20,
        sandbox_slots: asyncio.Semaphore | None = None,
        time_budget: float | None = None,
        paused: Callable[[], AbstractContextManager[None]] | None = None,
    ) -> None:
        self.task = task
        self.sandbox = MeteredSandbox(sandbox)  # (its runs are what the clock counts)
        self.tools = tools_for(task, tools)
        self.limits = limits
        self.max_observation_chars = max_observation_chars
        self.max_files = max_files
        self.max_file_bytes = max_file_bytes
        self.files: dict[str, str] = {}
        self.last_code: str | None = None
        self.clock = SlotClock(sandbox_slots, time_budget, paused)  # (time_budget: seconds of sandbox time)
        self._visible = Grader(self.sandbox, GradingConfig(limits=limits, scan=False), stats=RewardStats())

    def specs(self) -> list[dict[str, Any]]:
        if self.task.form == "tools":
            return list(self.task.tools)
        return tool_specs(self.tools)

    async def call(self, call: ToolCall) -> ToolResult:
        """One tool call's result. What the sandbox refuses as input (a file the episode wrote that
        clashes with the program's own: ``main.py``) is the call's error, shown to the model: raised,
        it ended the episode and stopped the whole rollout."""
        start = time.perf_counter()
        try:
            result = await self._dispatch(call)
        except (InputError, ValidationError) as e:  # (a run's files or source built from the call's arguments)
            result = ToolResult(call=call, observation=f"error: {e}")
        return result.model_copy(update={"seconds": time.perf_counter() - start})

    async def _dispatch(self, call: ToolCall) -> ToolResult:
        args = call.arguments
        if call.name == "invalid":
            return ToolResult(call=call, observation=f"error: {args.get('error', 'malformed tool call')}")
        if call.name not in self.tools:
            return ToolResult(
                call=call, observation=f"error: unknown tool {call.name!r}; available: {', '.join(self.tools)}"
            )
        bad = [k for k, v in args.items() if not isinstance(v, str)]
        if bad:
            return ToolResult(call=call, observation=f"error: arguments {bad} must be strings")
        if call.name == "submit":
            return self._submit(call)
        if self.task.form == "repo":
            return await self._repo_tool(call)
        if call.name == "write_file":
            return self._write(call)
        if call.name == "read_file":
            return self._read(call)
        if "code" not in args:
            return ToolResult(call=call, observation=f"error: {call.name} needs a 'code' argument")
        self.last_code = args["code"]
        if call.name == "run_tests":
            return await self._run_tests(call)
        return await self._run_code(call)

    def _submit(self, call: ToolCall) -> ToolResult:
        if self.task.form == "repo":  # the edits made are the answer
            return ToolResult(call=call, observation="submitted", submitted=self.repo_edits())
        text = submission_text(self.task, call)
        if text is None:
            return ToolResult(call=call, observation="error: submit needs 'code' or 'answer'")
        return ToolResult(call=call, observation="submitted", submitted=text)

    def _write(self, call: ToolCall) -> ToolResult:
        path, content = call.arguments.get("path"), call.arguments.get("content")
        if path is None or content is None:
            return ToolResult(call=call, observation="error: write_file needs 'path' and 'content'")
        try:
            path = check_relative_path(path)
        except ValueError as e:
            return ToolResult(call=call, observation=f"error: {e}")
        if len(content.encode()) > self.max_file_bytes:
            return ToolResult(call=call, observation=f"error: files are limited to {self.max_file_bytes} bytes")
        if path not in self.files and len(self.files) >= self.max_files:
            return ToolResult(call=call, observation=f"error: at most {self.max_files} files")
        placed = [*self.files, *self._given_paths]
        if clash := next((f for f in placed if f.startswith(path + "/") or path.startswith(f + "/")), None):
            # (a file where a directory must be: the run's files could not be laid out, which read as
            # the sandbox's failure, so an episode heading for a 0 ended without a reward)
            return ToolResult(call=call, observation=f"error: {path} and {clash} cannot both be files")
        self.files[path] = content
        return ToolResult(call=call, observation=f"wrote {path} ({len(content)} characters)")

    def _read(self, call: ToolCall) -> ToolResult:
        path = call.arguments.get("path", "")
        if path not in self.files:
            known = ", ".join(sorted(self.files)) or "none"
            return ToolResult(call=call, observation=f"error: no file {path!r} (files: {known})")
        return ToolResult(call=call, observation=truncate_middle(self.files[path], self.max_observation_chars))

    async def _run_code(self, call: ToolCall) -> ToolResult:
        program = Program(
            language=self.task.language,
            source=call.arguments["code"],
            stdin=call.arguments.get("stdin", ""),
            files=self._run_files(),
            environment=self.task.environment,
        )
        async with self.clock.held():
            result = await self.sandbox.run(program, self.limits or self.task.limits)
        if result.verdict is Verdict.SANDBOX_ERROR:
            return ToolResult(call=call, observation="", infra_error=result.sandbox_error or "sandbox error")
        return self._observe(call, result)

    @functools.cached_property
    def _given_paths(self) -> list[str]:
        """The paths of the task's own files in every run: an analysis task's data, a shell task's tree."""
        if self.task.form == "analysis":
            return [f.path for f in task_files(self.task)]
        if self.task.form == "shell" and self.task.workspace:
            return list(self.task.workspace.files)
        return []

    def _run_files(self) -> list[InputFile]:
        """A run's files: a shell task's tree (as it starts: the script is the answer) or an analysis
        task's data (to look at before answering), then the episode's own files."""
        if self.task.form == "analysis":
            data = [f for f in task_files(self.task) if f.path not in self.files]
            return data + [InputFile(path=p, content=c.encode()) for p, c in self.files.items()]
        tree = dict(self.task.workspace.files) if self.task.form == "shell" and self.task.workspace else {}
        executable = set(self.task.workspace.executable) if self.task.workspace else set()
        tree.update(self.files)
        return [InputFile(path=p, content=c.encode(), executable=p in executable) for p, c in tree.items()]

    def _observe(self, call: ToolCall, result: ExecutionResult) -> ToolResult:
        """A run's verdict, exit status and output, as an observation within the budget."""
        budget = self.max_observation_chars
        parts = [f"verdict: {result.verdict.value}" + (f" ({result.limit.value} limit)" if result.limit else "")]
        parts.append(f"exit code: {result.exit_code}" if result.signal is None else f"signal: {result.signal}")
        if result.compile is not None and result.compile.stderr:
            parts.append("compiler:\n" + truncate_middle(result.compile.stderr, budget // 2))
        if result.stdout:
            parts.append("stdout:\n" + truncate_middle(result.stdout, budget // 2))
        if result.stderr:
            parts.append("stderr:\n" + truncate_middle(result.stderr, budget // 2))
        return ToolResult(
            call=call,
            observation="\n".join(parts),
            verdict=result.verdict.value,
            exit_code=result.exit_code,
            wall_time=result.wall_time,
        )

    # -- repo tasks: the tree, the edits so far, a shell in it ----------------------------------

    def repo_edits(self) -> str:
        """The files changed so far, as a completion (what ``submit`` hands to the grader)."""
        return format_edits(self.files)

    async def _repo_file(self, path: str) -> tuple[str | None, str | None]:
        """(text, None) of a file of the tree as edited so far, or (None, infrastructure error);
        text is None with no error when the file does not exist."""
        if path in self.files:
            return self.files[path], None
        result = await self._repo_shell(f"cat -- {shlex.quote(path)}")
        if result.verdict is Verdict.SANDBOX_ERROR:
            return None, result.sandbox_error or "sandbox error"
        return (result.stdout if result.exit_code == 0 else None), None

    async def _repo_shell(self, command: str) -> ExecutionResult:
        """``command`` run in the tree as edited so far; its stdout is the command's own (without the
        line the driver prints first: a file read by ``cat`` must not begin with it)."""
        edits = [Edit(path=path, replace=text) for path, text in self.files.items()]
        program = repo_program(self.task, edits, [], command=command)
        async with self.clock.held():
            result = await self.sandbox.run(program, self.limits or self.task.limits or REPO_GRADING_LIMITS)
        return result.model_copy(update={"stdout": driver_output(result.stdout)[1]})

    async def _repo_tool(self, call: ToolCall) -> ToolResult:
        args = call.arguments
        assert self.task.workspace is not None
        if call.name == "run_shell":
            if "command" not in args:
                return ToolResult(call=call, observation="error: run_shell needs a 'command' argument")
            result = await self._repo_shell(args["command"])
            if result.verdict is Verdict.SANDBOX_ERROR:
                return ToolResult(call=call, observation="", infra_error=result.sandbox_error or "sandbox error")
            return self._observe(call, result)
        if call.name == "run_tests":
            return (await self.check_visible(self.repo_edits())).tool_result(call)
        path = args.get("path")
        if path is None:
            return ToolResult(call=call, observation=f"error: {call.name} needs a 'path' argument")
        if call.name in ("write_file", "edit_file") and (why := path_allowed(path, self.task.workspace)):
            return ToolResult(call=call, observation=f"error: {why}")
        if call.name == "write_file":
            return self._write(call)
        text, error = await self._repo_file(path)
        if error is not None:
            return ToolResult(call=call, observation="", infra_error=error)
        if text is None:
            return ToolResult(call=call, observation=f"error: no file {path!r} in the repository")
        if call.name == "read_file":
            return ToolResult(call=call, observation=truncate_middle(text, self.max_observation_chars))
        search, replace = args.get("search"), args.get("replace")
        if search is None or replace is None:
            return ToolResult(call=call, observation="error: edit_file needs 'path', 'search' and 'replace'")
        count = text.count(search) if search else 0
        if count != 1:
            return ToolResult(
                call=call, observation=f"error: `search` occurs {count} times in {path}; it must occur once"
            )
        if path not in self.files and len(self.files) >= self.max_files:
            return ToolResult(call=call, observation=f"error: at most {self.max_files} files")
        self.files[path] = text.replace(search, replace, 1)
        return ToolResult(call=call, observation=f"edited {path}")

    async def _run_tests(self, call: ToolCall) -> ToolResult:
        return (await self.check_visible(call.arguments["code"])).tool_result(call)

    async def check_visible(self, completion: str) -> VisibleCheck:
        """Grade ``completion`` on the visible tests."""
        visible = self.task.visible_tests
        if self.task.form == "answer" or not visible:
            return VisibleCheck("this task has no visible tests to run; use run_code to try your code")
        task = self.task.model_copy(update={"tests": visible})
        async with self.clock.held():
            reward = await self._visible.grade(task, completion)
        if reward.value is None:
            return VisibleCheck("", reward.verdict, reward.error or "sandbox error")
        observation = truncate_middle(reward.feedback(), self.max_observation_chars)
        return VisibleCheck(observation, reward.verdict, None, reward.passed, reward.total)
