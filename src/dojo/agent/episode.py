"""One episode: a policy works on one task over one or more turns, then the graders score it.

Two ways to work, chosen by ``EpisodeConfig.mode``:

- ``feedback`` (any model): each reply's code is checked against the task's visible tests; if some
  fail, the failures go back as the next user message (code → run → error → fix). The episode ends
  when the visible tests pass or the turns run out. With ``max_turns=1`` it is single-turn.
- ``tools``: the model calls tools (``dojo.agent.tools``): natively through the server's tool
  calling, or as ``<tool_call>`` text. A reply without a tool call, or a ``submit``, is final. On a
  ``tools`` task (its own functions, e.g. BFCL's) the first reply's calls are the answer.

A ``tools`` task with a simulated API (``Task.api``, BFCL's multi-turn) is a conversation in either
mode (``dojo.agent.api_conversation``): the user speaks once per turn, each reply's calls run on
the API and their results come back, a reply without a call ends the turn, and every call of every
turn is the answer.

Limits: turns, completion tokens over the whole episode, tool calls per reply, the sandbox time
of the episode's tool calls, the model's context, and a wall-clock deadline. The final candidate
(the submission, else the last reply) is graded on every test, hidden ones included, when the
episode ends by its own doing: a reply, a submit, or one of the limits the policy's choices use
up (turns, tokens, tool time, context). A policy or sandbox failure, or the deadline, leaves the
episode without a reward (``status`` says which): the scheduler retries it and never scores it.
The deadline does not count time on the sandbox (its runs and waits for a slot: the sandbox bounds
each run, and the tool time budget the runs together) or waits for a policy request slot: a policy
that slowed its own runs, or whose runs made the fleet busy, had passed the deadline and turned its
0 into no reward. Nor does it count a policy request's decoding up to ``decode_allowance`` (its
``max_tokens`` at ``MIN_DECODE_RATE``, the slowest pace taken for a working server): the reply's
length is bounded by the token budget, and a long one had passed the deadline the same way. Grading
has a deadline of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from dojo.agent.api_conversation import ApiConversation
from dojo.agent.feedback import feedback_step
from dojo.agent.policy import (
    Completion,
    ContextFull,
    Policy,
    PolicyError,
    RequestRefused,
    SamplingParams,
    ToolCall,
    decode_allowance,
)
from dojo.agent.sandbox_clock import SlotClock
from dojo.agent.tool_calls import format_tool_call, parse_tool_calls, without_tool_calls
from dojo.agent.tools import Toolbox, ToolResult, tools_for
from dojo.rewards.graders import Grader
from dojo.rewards.outcome import Reward
from dojo.sandbox.limits import DEFAULT_COMPILE_LIMITS, DEFAULT_LIMITS
from dojo.sandbox.runtime import HOST_MARGIN_S
from dojo.tasks.model import Task

if TYPE_CHECKING:
    from dojo.agent.turn_rewards import ProcessScorer

EpisodeStatus = Literal[
    "answered",  # the model gave its final reply (or passed the visible tests)
    "submitted",  # the model called submit
    "turn_limit",  # turns ran out; the last candidate was graded
    "token_limit",  # the token budget ran out; the last candidate was graded
    "tool_time_limit",  # the tools' sandbox time ran out; the last candidate was graded
    "context_limit",  # the conversation outgrew the model's context; the last candidate was graded
    "request_refused",  # the server refused a request holding the policy's replies; the last candidate was graded
    "prompt_too_long",  # the task's prompt alone does not fit the model's context: no reward, no retry
    "prompt_refused",  # the server refused the task's own first request (400/422): no reward, no retry
    "deadline",  # the wall-clock deadline passed: no reward
    "policy_error",  # the policy server failed: no reward
    "infra_error",  # the sandbox failed (in a tool or in grading): no reward
]
SCORED_STATUSES = frozenset(
    {"answered", "submitted", "turn_limit", "token_limit", "tool_time_limit", "context_limit", "request_refused"}
)
FINAL_STATUSES = SCORED_STATUSES | {"prompt_too_long", "prompt_refused"}  # a retry would end the same way

TOOLS_SYSTEM_PROMPT = (
    "You can use tools. To call one, write\n<tool_call>\n"
    '{{"name": "<tool>", "arguments": {{...}}}}\n</tool_call>\n'
    "Tools: {tools}. Call submit with your final solution; a reply without a tool call is your final answer."
)
GREETING = "Hi! How can I help you today?"  # the agent's first words when a served user opens (tau2's)
USER_STOPS = ("###STOP###", "###TRANSFER###", "###OUT-OF-SCOPE###")  # tau2's user ends the conversation
# A tools task's own functions: its calls are the answer (no submit).
TASK_TOOLS_PROMPT = (
    "To call a function, write\n<tool_call>\n"
    '{{"name": "<function>", "arguments": {{...}}}}\n</tool_call>\n'
    "(one block per call). Functions: {tools}. A reply without a call ends your turn."
)


class EpisodeConfig(BaseModel):
    """How an episode runs. Every field has a default; ``max_turns=1`` is single-turn."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    mode: Literal["feedback", "tools"] = Field("feedback", description="feedback: code→tests→fix; tools: tool calls.")
    max_turns: int = Field(1, ge=1, le=64, description="Policy calls per episode.")
    max_total_tokens: int = Field(4096, ge=1, description="Completion tokens over all turns.")
    time_limit: float = Field(
        600.0,
        gt=0,
        description="Wall-clock deadline of one episode's turns, in seconds, stopped while it is on the sandbox or "
        "waits for a slot, and for each policy request's first max_tokens / 10 seconds (its decoding at the slowest "
        "pace taken for a working server); grading has one of its own: as long, plus one run per test and one more "
        "to their wall limits.",
    )
    sampling: SamplingParams = Field(default_factory=SamplingParams)
    tools: list[str] | None = Field(None, description="tools mode: tools offered (default: the task form's own).")
    native_tools: bool = Field(True, description="tools mode: pass tool specs to the server (OpenAI tools).")
    tool_prompt: bool = Field(True, description="tools mode: add a system message describing the tool format.")
    max_observation_chars: int = Field(2000, ge=100, description="Cut of each tool observation.")
    max_tool_calls: int = Field(
        16,
        ge=1,
        le=256,
        description="Tool calls run per reply; each call past it is answered 'not run' (one reply of 300 read_file "
        "calls had put 609,000 characters into the next prompt).",
    )
    tool_time_limit: float | None = Field(
        None,
        gt=0,
        description="Seconds the episode's tool calls and visible checks may take in all, less their runs' waits for a "
        "sandbox slot (a run's round trip beyond the wall time the sandbox reports), checked before each call; past "
        "it the episode ends and its last candidate is graded. Default: half of time_limit (which does not count "
        "time on the sandbox).",
    )
    max_user_turns: int = Field(10, ge=1, le=64, description="Messages a served user model may send.")

    @property
    def tool_budget(self) -> float:
        """The tools' sandbox time budget, in seconds."""
        return self.tool_time_limit if self.tool_time_limit is not None else self.time_limit / 2


class TurnRecord(BaseModel):
    """One policy call and what its tool calls (or the feedback check) did."""

    model_config = ConfigDict(extra="forbid")

    index: int
    completion: Completion
    tool_results: list[ToolResult] = Field(default_factory=list)
    policy_seconds: float = 0.0
    tool_seconds: float = 0.0


class Episode(BaseModel):
    """Everything that happened in one episode: the full record a trainer or an audit needs."""

    model_config = ConfigDict(extra="forbid")

    episode_id: str
    task_id: str
    group_id: str
    sample_index: int
    status: EpisodeStatus
    messages: list[dict[str, Any]]
    turns: list[TurnRecord] = Field(default_factory=list)
    final: str | None = Field(None, description="The text that was graded.")
    reward: Reward | None = None
    turn_rewards: list[dict[str, float]] | None = Field(
        None, description="Each turn's process reward parts and total (EpisodeRunner(process=...)); None: none."
    )
    error: str | None = None
    attempt: int = Field(0, description="Retries before this episode (infrastructure failures).")
    started_at: float = 0.0
    wall_seconds: float = 0.0
    policy_seconds: float = 0.0
    tool_seconds: float = 0.0
    grade_seconds: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def scored(self) -> bool:
        return self.status in SCORED_STATUSES and self.reward is not None and self.reward.value is not None

    @property
    def passed(self) -> bool:
        """Scored, and every test passed."""
        return self.scored and self.reward is not None and self.reward.verdict == "pass"

    @property
    def value(self) -> float | None:
        return self.reward.value if self.reward is not None else None


class Deadline:
    """An episode's deadline (``asyncio.timeout``), stopped for the time it waits for a slot (a busy
    fleet or policy server is no episode's own time) and, through its tools' ``SlotClock``, for its
    time on the sandbox."""

    def __init__(self, timeout: asyncio.Timeout) -> None:
        self.timeout = timeout

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """The deadline stopped for the block, then going on with what was left of it."""
        when = self.timeout.when()
        if when is None or self.timeout.expired():  # (paused already, or past: nothing to stop)
            yield
            return
        loop = asyncio.get_running_loop()
        left = when - loop.time()
        self.timeout.reschedule(None)
        try:
            yield
        finally:
            if not self.timeout.expired():
                self.timeout.reschedule(loop.time() + max(0.0, left))

    @contextlib.asynccontextmanager
    async def held(self, slots: asyncio.Semaphore | None) -> AsyncIterator[None]:
        """One of ``slots`` held for the block, the deadline stopped while it waited for it."""
        if slots is not None:
            with self.paused():
                await slots.acquire()
        try:
            yield
        finally:
            if slots is not None:
                slots.release()

    @contextlib.asynccontextmanager
    async def decoding(self, slots: asyncio.Semaphore | None, max_tokens: int) -> AsyncIterator[None]:
        """A policy's request: one of ``slots`` held (the wait not counted), and the deadline stopped
        for the request's first ``decode_allowance(max_tokens)`` seconds (its reply's decoding at the
        slowest pace taken for a working server); only what it takes past that counts. A reply's
        length is the policy's choice: a wrong reply of 8,192 tokens passed the deadline (no reward)
        where a terse one scored 0 (found 2026-12-06); a server slower than that pace, or hung, still
        reaches the deadline (the set-up's failure: no reward)."""
        async with self.held(slots):
            when = self.timeout.when()
            if when is None or self.timeout.expired():
                yield
                return
            loop = asyncio.get_running_loop()
            start, allowance = loop.time(), decode_allowance(max_tokens)
            self.timeout.reschedule(when + allowance)
            try:
                yield
            finally:
                if not self.timeout.expired():
                    charged = max(0.0, loop.time() - start - allowance)
                    self.timeout.reschedule(loop.time() + max(0.0, when - start - charged))


def refusal_status(error: ContextFull | RequestRefused, *, replied: bool) -> EpisodeStatus:
    """How a server's refusal ends an episode. Once the request holds the policy's replies, its
    length (``ContextFull``) or what the replies hold (``RequestRefused``: a template that takes one
    tool call per message, and a reply of two) is the episode's own doing: graded on its last
    candidate (unscored, it dodged its 0 on every retry). Before, it is the setup's (the task's
    prompt, a server option): unscored, and not retried, since a retry is refused the same way."""
    if isinstance(error, ContextFull):
        return "context_limit" if replied else "prompt_too_long"
    return "request_refused" if replied else "prompt_refused"


def _tool_message(result: ToolResult) -> dict[str, Any]:
    call = result.call
    return {"role": "tool", "tool_call_id": call.id, "name": call.name, "content": result.observation}


def _assistant_message(c: Completion) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant", "content": without_tool_calls(c.text) if c.tool_calls else c.text}
    if c.tool_calls:
        msg["tool_calls"] = [
            {"id": t.id, "type": "function", "function": {"name": t.name, "arguments": json.dumps(t.arguments)}}
            for t in c.tool_calls
        ]
    return msg


class EpisodeRunner:
    """Runs episodes of one policy with one grader. ``policy_slots``/``sandbox_slots`` bound how
    many policy requests and sandbox runs are in flight (shared by all episodes of a scheduler)."""

    def __init__(
        self,
        policy: Policy,
        grader: Grader,
        config: EpisodeConfig | None = None,
        *,
        policy_slots: asyncio.Semaphore | None = None,
        sandbox_slots: asyncio.Semaphore | None = None,
        user: Policy | None = None,
        process: ProcessScorer | None = None,
    ) -> None:
        self.policy = policy
        self.grader = grader
        self.config = config or EpisodeConfig()
        self.policy_slots = policy_slots
        self.sandbox_slots = sandbox_slots
        self.user = user  # a served user model, for tasks whose API has a user brief (tau2)
        self.process = process  # per-turn rewards (dojo.agent.turn_rewards), computed after grading

    async def run(self, task: Task, *, sample_index: int = 0, group_id: str | None = None, attempt: int = 0) -> Episode:
        group_id = group_id or task.id
        ep = Episode(
            episode_id=f"{group_id}#{sample_index}",
            task_id=task.id,
            group_id=group_id,
            sample_index=sample_index,
            status="answered",
            messages=self._initial_messages(task),
            attempt=attempt,
            started_at=time.time(),
        )
        start = time.perf_counter()
        grading = False
        try:
            async with asyncio.timeout(self.config.time_limit) as deadline:
                await self._loop(task, ep, Deadline(deadline))
            if ep.status in SCORED_STATUSES:
                grading = True
                async with asyncio.timeout(self.grade_limit(task)) as deadline:  # (the grade's own)
                    await self._grade(task, ep, Deadline(deadline))
        except TimeoutError:
            ep.status, ep.reward = "deadline", None
            limit = self.grade_limit(task) if grading else self.config.time_limit
            ep.error = f"{'its grading' if grading else 'the episode'} passed its {limit:g} s deadline"
        except PolicyError as e:
            ep.status, ep.reward, ep.error = "policy_error", None, str(e)
        ep.wall_seconds = time.perf_counter() - start
        return ep

    def _initial_messages(self, task: Task) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = [dict(m) for m in task.messages()]
        if self.config.mode == "tools" and self.config.tool_prompt:
            template = TASK_TOOLS_PROMPT if task.form == "tools" else TOOLS_SYSTEM_PROMPT
            note = template.format(tools=", ".join(tools_for(task, self.config.tools)))
            if messages and messages[0]["role"] == "system":
                messages[0]["content"] = f"{messages[0]['content']}\n\n{note}"
            else:
                messages.insert(0, {"role": "system", "content": note})
        return messages

    async def _generate(self, ep: Episode, tools: list[dict[str, Any]] | None, deadline: Deadline) -> Completion | None:
        remaining = self.config.max_total_tokens - ep.completion_tokens
        if remaining <= 0:
            ep.status = "token_limit"
            return None
        params = self.config.sampling
        if params.max_tokens > remaining:
            params = params.model_copy(update={"max_tokens": remaining})
        t0 = time.perf_counter()
        try:
            async with deadline.decoding(self.policy_slots, params.max_tokens):
                completions = await self.policy.generate(ep.messages, params, n=1, tools=tools)
        except (ContextFull, RequestRefused) as e:
            ep.status, ep.error = refusal_status(e, replied=bool(ep.turns)), str(e)
            return None
        finally:  # (a request the deadline ended is counted too)
            dt = time.perf_counter() - t0
            ep.policy_seconds += dt
        if not completions:
            raise PolicyError("the policy returned no completion")
        c = completions[0]
        ep.completion_tokens += c.num_tokens
        ep.prompt_tokens += c.prompt_tokens or 0
        ep.messages.append(_assistant_message(c))
        ep.turns.append(TurnRecord(index=len(ep.turns), completion=c, policy_seconds=dt))
        return c

    async def _api_loop(self, task: Task, ep: Episode, deadline: Deadline) -> None:
        """A conversation over the task's simulated API: turns of the user, steps of calls."""
        cfg = self.config
        talk = ApiConversation(
            task,
            self.grader.sandbox,
            limits=self.grader.limits,
            max_observation_chars=cfg.max_observation_chars,
            sandbox_slots=self.sandbox_slots,
            time_budget=cfg.tool_budget,
            paused=deadline.paused,
        )
        native = cfg.mode == "tools" and cfg.native_tools
        served = self.user is not None and task.api is not None and task.api.user is not None
        if served:  # the served user opens, answering the agent's greeting (tau2's orchestration)
            del ep.messages[1:]
            ep.messages.append({"role": "assistant", "content": GREETING})
            try:
                first = await self._user_says(task, ep, deadline)
            except (ContextFull, RequestRefused) as e:  # (the user's brief alone: the setup's; it was graded 0)
                ep.status, ep.error = refusal_status(e, replied=False), f"the user model's prompt: {e}"
                return
            if first is None:
                ep.status, ep.final = "answered", talk.answer()
                return
            ep.messages.append({"role": "user", "content": first})
        user_turns = 0
        ep.status = "turn_limit"
        for _ in range(cfg.max_turns):
            c = await self._generate(ep, talk.specs() if native else None, deadline)
            if c is None:
                break
            record = ep.turns[-1]
            talk.reply(c.text)
            calls = c.tool_calls or parse_tool_calls(c.text)
            if calls and not talk.turn_exhausted:
                made, skipped = calls[: cfg.max_tool_calls], calls[cfg.max_tool_calls :]
                results = await talk.step(made)
                record.tool_seconds = sum(r.seconds for r in results)
                ep.tool_seconds += record.tool_seconds
                if (err := next((r.infra_error for r in results if r.infra_error), None)) is not None:
                    record.tool_results += results
                    ep.status, ep.error = "infra_error", err
                    return
                results += [self._not_run(call) for call in skipped]
                record.tool_results += results
                ep.messages += [_tool_message(r) for r in results]
                if talk.cut_short is not None:  # (tau2 ends it here; the grader scores it 0)
                    break
                if self._out_of_tool_time(talk.clock, ep):
                    break
                continue
            if served:
                user_turns += 1
                talk.next_turn()  # later calls count in the last scripted turn (a final-state check)
                message = await self._user_says(task, ep, deadline) if user_turns < cfg.max_user_turns else None
            else:
                message = talk.next_turn()
            if message is None:
                ep.status = "answered"
                break
            ep.messages.append({"role": "user", "content": message})
        ep.final = talk.answer()

    async def _user_says(self, task: Task, ep: Episode, deadline: Deadline) -> str | None:
        """The served user's next message, or None when it ends the conversation (###STOP###, a
        transfer, or out of scope). It sees the conversation from its side: its brief as the
        system prompt, the agent's texts as the other party's, no tool traffic."""
        assert self.user is not None and task.api is not None and task.api.user is not None
        flipped: list[dict[str, Any]] = [{"role": "system", "content": task.api.user}]
        for m in ep.messages[1:]:
            role = {"assistant": "user", "user": "assistant"}.get(m["role"])
            if role is None or not m.get("content"):
                continue
            if flipped[-1]["role"] == role:  # two agent texts in a row, as one (a template that takes
                merged = f"{flipped[-1]['content']}\n\n{m['content']}"  # turns refused the conversation)
                flipped[-1] = {"role": role, "content": merged}
            else:
                flipped.append({"role": role, "content": m["content"]})
        t0 = time.perf_counter()
        try:
            async with deadline.decoding(self.policy_slots, self.config.sampling.max_tokens):
                completions = await self.user.generate(flipped, self.config.sampling, n=1)
        except (ContextFull, RequestRefused):
            # the user model cannot go on with what the agent said (past its context, or refused): the
            # user has no more to say, and the episode is graded (unscored, the policy dodged its 0)
            if not ep.turns:
                raise
            return None
        finally:
            ep.policy_seconds += time.perf_counter() - t0
        if not completions:
            raise PolicyError("the user model returned no completion")
        text = completions[0].text.strip()
        if not text or any(token in text for token in USER_STOPS):
            return None
        return text

    async def _loop(self, task: Task, ep: Episode, deadline: Deadline) -> None:
        cfg = self.config
        if task.api is not None:
            await self._api_loop(task, ep, deadline)
            return
        toolbox = Toolbox(
            task,
            self.grader.sandbox,
            tools=cfg.tools,
            limits=self.grader.limits,
            max_observation_chars=cfg.max_observation_chars,
            sandbox_slots=self.sandbox_slots,
            time_budget=cfg.tool_budget,
            paused=deadline.paused,
        )
        specs = toolbox.specs() if cfg.mode == "tools" and cfg.native_tools else None
        for turn in range(cfg.max_turns):
            c = await self._generate(ep, specs, deadline)
            if c is None:
                return
            record = ep.turns[-1]
            ep.final = c.text
            if cfg.mode == "feedback":
                step = await feedback_step(toolbox, c.text, last_turn=turn + 1 == cfg.max_turns)
                if (check := step.tool_result(c.text)) is not None:
                    record.tool_seconds = step.seconds
                    ep.tool_seconds += step.seconds
                    record.tool_results.append(check)
                if step.outcome == "infra_error":
                    ep.status, ep.error = "infra_error", step.error
                elif step.outcome == "last_turn":
                    ep.status = "answered" if cfg.max_turns == 1 else "turn_limit"
                elif step.done:
                    ep.status = "answered"
                if step.done or self._out_of_tool_time(toolbox.clock, ep):
                    return
                assert step.message is not None
                ep.messages.append(step.message)
                continue
            calls = c.tool_calls or parse_tool_calls(c.text)
            if task.form == "tools":  # the calls are the answer (graded, never run)
                ep.final = "\n".join(format_tool_call(call) for call in calls) if calls else c.text
                ep.status = "submitted" if calls else "answered"
                return
            if not calls:
                ep.status = "answered"
                return
            for k, call in enumerate(calls):
                spent = toolbox.clock.spent and call.name != "submit"  # (a submit runs nothing)
                if k >= cfg.max_tool_calls or spent:
                    result = self._not_run(call, spent=spent)
                else:
                    result = await toolbox.call(call)
                record.tool_results.append(result)
                record.tool_seconds += result.seconds
                ep.tool_seconds += result.seconds
                if result.infra_error is not None:
                    ep.status, ep.error = "infra_error", result.infra_error
                    return
                ep.messages.append(_tool_message(result))
                if result.submitted is not None:
                    ep.final = result.submitted
                    ep.status = "submitted"
                    return
            if task.form == "repo":  # the edits so far are the candidate
                ep.final = toolbox.repo_edits()
            elif toolbox.last_code is not None:
                ep.final = f"```{task.language}\n{toolbox.last_code}\n```"
            if self._out_of_tool_time(toolbox.clock, ep):
                return
        ep.status = "turn_limit"

    def _not_run(self, call: ToolCall, *, spent: bool = False) -> ToolResult:
        """What a call past the reply's ``max_tool_calls``, or past the tools' time, gets: an error, and no run."""
        if spent:
            return ToolResult(call=call, observation="error: not run: the episode's sandbox time is spent")
        limit = self.config.max_tool_calls
        return ToolResult(call=call, observation=f"error: not run: at most {limit} tool calls run per reply")

    def _out_of_tool_time(self, clock: SlotClock, ep: Episode) -> bool:
        """Whether the tools' sandbox time is spent (the episode then ends, graded: ``tool_time_limit``)."""
        if not clock.spent:
            return False
        ep.status = "tool_time_limit"
        budget = self.config.tool_budget
        ep.error = f"the tool calls used {clock.seconds:.1f} s of sandbox time, past the {budget:g} s budget"
        return True

    def grade_limit(self, task: Task) -> float:
        """The grade's own deadline: ``time_limit`` for the host's work, and room for as many runs as
        the task has tests, and one more, each to its wall limit (a compile's too) and the host's
        margin: what the sandbox bounds by itself. It was ``time_limit`` alone: a final answer that
        slept through its runs' wall limits (a SciCode task's 600 s, or eight tests of 2 s in waves)
        ended the episode ``deadline``, unscored, where its runs' own limits would have scored it 0."""
        limits = self.grader.limits or task.limits or DEFAULT_LIMITS
        per_run = limits.wall_time + DEFAULT_COMPILE_LIMITS.wall_time + HOST_MARGIN_S
        return self.config.time_limit + (len(task.tests) + 1) * per_run

    async def _grade(self, task: Task, ep: Episode, deadline: Deadline) -> None:
        t0 = time.perf_counter()
        async with deadline.held(self.sandbox_slots if task.form != "answer" else None):  # answers: no run
            reward = await self.grader.grade(task, ep.final or "")
        ep.grade_seconds = time.perf_counter() - t0
        ep.reward = reward
        if reward.value is None:
            ep.status, ep.error = "infra_error", reward.error or "the sandbox failed while grading"
        elif self.process is not None:
            ep.turn_rewards = await self.process.score(task, ep)
