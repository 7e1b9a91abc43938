"""Policies: what turns a conversation into the model's next message.

A ``Policy`` takes chat messages and sampling parameters and returns ``n`` completions, each with
its text, token ids and logprobs when the backend returns them, and native tool calls when the
server parsed them. ``OpenAIPolicy`` talks to any OpenAI-compatible server (vLLM, SGLang, dojo's
own ``dojo policy serve``) through the ``openai`` client; ``HFPolicy`` (``dojo.agent.hf_policy``)
runs a local Hugging Face model.

A failure of the server (connection refused, 5xx, 429, timeout, any other status) raises
``PolicyError``: it is an infrastructure failure, retried by the scheduler and never scored. A
conversation that no longer fits the model's context raises ``ContextFull``, and a request the
server refuses for what it holds (400, 422) ``RequestRefused``: past the first turn both are the
episode's own doing (its replies and the observations they asked for), not the server's failure,
so the episode ends there and its last candidate is graded (``dojo.agent.episode``).
"""

from __future__ import annotations

import re
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from dojo.errors import DojoError, InputError, refused_for_length
from dojo.tasks.values import untrusted_json


class PolicyError(DojoError, RuntimeError):
    """The policy backend failed (not the model's fault): retry or drop, never score."""


class ContextFull(InputError):
    """The conversation does not fit the model's context window (with the reply's ``max_tokens``).
    A server answers it with 400 (vLLM: "This model's maximum context length is ..."): it is the
    request's length, not the server's failure."""


class RequestRefused(PolicyError):
    """The server refused a request for what it holds (a 400 or 422 that is not about the context):
    after the first turn, the policy's own replies (a chat template that takes one tool call per
    message refuses a reply of two). ``dojo.agent.episode`` grades the episode there."""


# The slowest decoding (tokens a second, per sequence) taken for a working server's: a request for
# ``max_tokens`` is given ``max_tokens / MIN_DECODE_RATE`` seconds before it counts as the server's
# failure (the client's timeout) or as the episode's own time (its deadline). A fixed 300 s had
# turned a reply long on purpose (8,192 tokens at 20 a second, a batched server's pace) into a
# policy failure, no reward, where a terse wrong one scored 0 (found 2026-12-06).
MIN_DECODE_RATE = 10.0


def decode_allowance(max_tokens: int) -> float:
    """Seconds a request for ``max_tokens`` may take at the slowest decoding taken for working."""
    return max_tokens / MIN_DECODE_RATE


_CONTEXT_SIZE = re.compile(r"maximum context length is (\d+) tokens")
_PROMPT_SIZE = re.compile(r"has (\d+) input tokens|\((\d+) in the messages")


def reply_room(message: str) -> int | None:
    """The tokens a reply has room for, where a server's refusal says the prompt fits the context
    (vLLM: "maximum context length is 4096 tokens and your request has 2778 input tokens"), else None."""
    limit, prompt = _CONTEXT_SIZE.search(message), _PROMPT_SIZE.search(message)
    if limit is None or prompt is None:
        return None
    room = int(limit[1]) - int(prompt[1] or prompt[2])
    return room if room > 0 else None


def context_full_message(limit: int, prompt_tokens: int) -> str:
    """What a server says of a prompt of ``prompt_tokens`` past a context of ``limit`` (vLLM's words)."""
    return (
        f"This model's maximum context length is {limit} tokens. However, your request has {prompt_tokens} "
        "input tokens."
    )


class SamplingParams(BaseModel):
    """Sampling settings, passed through to the backend."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    temperature: float = Field(1.0, ge=0.0, le=10.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    max_tokens: int = Field(512, ge=1, description="Most new tokens per completion.")
    stop: list[str] = Field(default_factory=list, description="Stop sequences (not included in the text).")
    seed: int | None = None
    logprobs: bool = Field(True, description="Ask for the logprob of each sampled token.")


class ToolCall(BaseModel):
    """One tool call of an assistant message: a name and JSON arguments."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = ""
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class Completion(BaseModel):
    """One sampled assistant message."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    text: str
    finish_reason: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    prompt_token_ids: list[int] | None = Field(
        None, description="The ids the reply was conditioned on, when the backend says (vLLM's return_token_ids)."
    )
    prompt_tokens: int | None = None
    completion_tokens: int | None = None

    @property
    def num_tokens(self) -> int:
        """Completion tokens: from the server's count, else token ids, else a 4-chars-per-token guess."""
        if self.completion_tokens is not None:
            return self.completion_tokens
        if self.token_ids is not None:
            return len(self.token_ids)
        return max(1, len(self.text) // 4)


@runtime_checkable
class Policy(Protocol):
    """Anything that samples ``n`` assistant messages for a conversation."""

    async def generate(
        self,
        messages: list[dict[str, Any]],
        params: SamplingParams,
        *,
        n: int = 1,
        tools: list[dict[str, Any]] | None = None,
    ) -> list[Completion]: ...


def _tool_calls(message: Any) -> list[ToolCall]:
    calls: list[ToolCall] = []
    for call in getattr(message, "tool_calls", None) or []:
        fn = getattr(call, "function", None)
        if fn is None:
            continue
        try:
            args = untrusted_json(fn.arguments or "{}")
        except ValueError:
            args = {"_unparsed": str(fn.arguments).encode("utf-8", "replace").decode()}  # (no lone surrogate kept)
        calls.append(ToolCall(id=call.id or "", name=fn.name, arguments=args if isinstance(args, dict) else {}))
    return calls


def _completion(
    choice: Any,
    text: str,
    logprobs: list[float] | None,
    usage: Any,
    choices: int,
    tool_calls: list[ToolCall],
    prompt_token_ids: list[int] | None = None,
) -> Completion:
    """One choice of a chat or completions response. Its completion tokens: its token ids (vLLM's
    ``return_token_ids``) or logprobs, else the usage when it is the only choice."""
    token_ids = _extra(choice, "token_ids")
    count = len(token_ids) if token_ids is not None else len(logprobs) if logprobs is not None else None
    if count is None and usage is not None and choices == 1:
        count = int(usage.completion_tokens)
    return Completion(
        text=text,
        finish_reason=choice.finish_reason,
        tool_calls=tool_calls,
        token_ids=token_ids,
        logprobs=logprobs,
        prompt_token_ids=_extra(choice, "prompt_token_ids") or prompt_token_ids,
        prompt_tokens=usage.prompt_tokens if usage else None,
        completion_tokens=count,
    )


def _extra(obj: Any, key: str) -> Any:
    extra = getattr(obj, "model_extra", None) or {}
    return extra.get(key)


class OpenAIPolicy:
    """A policy served by an OpenAI-compatible server, through the official ``openai`` client.

    ``api="chat"`` uses ``/v1/chat/completions`` (the server applies the chat template);
    ``api="completions"`` renders the conversation with ``chat_template`` (a callable
    ``messages -> str``) and uses ``/v1/completions``. Token ids are requested vLLM-style
    (``return_token_ids``) and read when the server returns them; logprobs likewise. ``timeout``:
    seconds a request may take at least (a longer reply gets its decoding at ``MIN_DECODE_RATE``).
    """

    def __init__(
        self,
        base_url: str,
        model: str | None = None,
        *,
        api: Literal["chat", "completions"] = "chat",
        api_key: str = "EMPTY",
        timeout: float = 300.0,
        max_retries: int = 0,
        extra_body: dict[str, Any] | None = None,
        chat_template: Any = None,
    ) -> None:
        import openai

        if api not in ("chat", "completions"):
            raise ValueError(f"api must be 'chat' or 'completions', not {api!r}")
        if api == "completions" and chat_template is None:
            raise ValueError("api='completions' needs chat_template: a function from messages to the prompt text")
        self.base_url = base_url
        self.model = model
        self.api = api
        self.extra_body = {"return_token_ids": True, **(extra_body or {})}
        self.chat_template = chat_template
        self.timeout = timeout
        self._client = openai.AsyncOpenAI(base_url=base_url, api_key=api_key, timeout=timeout, max_retries=max_retries)

    async def model_name(self) -> str:
        """The model to ask for: the one given, else the server's first model."""
        if self.model is None:
            try:
                models = await self._client.models.list()
            except Exception as e:
                raise PolicyError(f"cannot list models at {self.base_url}: {e}") from e
            if not models.data:
                raise PolicyError(f"the server at {self.base_url} serves no model")
            self.model = models.data[0].id
        return self.model

    async def close(self) -> None:
        await self._client.close()

    async def generate(
        self,
        messages: list[dict[str, Any]],
        params: SamplingParams,
        *,
        n: int = 1,
        tools: list[dict[str, Any]] | None = None,
    ) -> list[Completion]:
        """``n`` completions. Where the server says the prompt fits its context but not with
        ``max_tokens`` more (vLLM's words give both sizes), it is asked once more for what fits: the
        reply shorter, rather than an episode ended (or a task left out) for a prompt that fits."""
        try:
            return await self._generate(messages, params, n, tools)
        except ContextFull as e:
            room = reply_room(str(e))
            if room is None or room >= params.max_tokens:
                raise
            return await self._generate(messages, params.model_copy(update={"max_tokens": room}), n, tools)

    async def _generate(
        self, messages: list[dict[str, Any]], params: SamplingParams, n: int, tools: list[dict[str, Any]] | None
    ) -> list[Completion]:
        import openai

        model = await self.model_name()
        common: dict[str, Any] = {
            "model": model,
            "n": n,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "max_tokens": params.max_tokens,
            "extra_body": self.extra_body,
            # (at least ``timeout``; more for a long reply: its decoding at MIN_DECODE_RATE)
            "timeout": max(self.timeout, decode_allowance(params.max_tokens)),
        }
        if params.stop:
            common["stop"] = params.stop
        if params.seed is not None:
            common["seed"] = params.seed
        try:
            if self.api == "chat":
                if tools:
                    common["tools"] = tools
                if params.logprobs:  # (left out, not null, for "no": a server may take only a boolean)
                    common["logprobs"] = True
                chat = await self._client.chat.completions.create(
                    messages=messages,  # type: ignore[arg-type]
                    **common,
                )
                return self._from_chat(chat)
            prompt = self.chat_template(messages)
            text = await self._client.completions.create(
                prompt=prompt, logprobs=1 if params.logprobs else None, **common
            )
            return self._from_completions(text)
        except (openai.APIConnectionError, openai.APITimeoutError, openai.InternalServerError) as e:
            raise PolicyError(f"policy server {self.base_url} failed: {e}") from e
        except openai.RateLimitError as e:
            raise PolicyError(f"policy server {self.base_url} is overloaded: {e}") from e
        except openai.APIStatusError as e:
            # (a 400 for a context overflow, a 413 or 422, raised out of the episode and stopped the rollout)
            status = e.status_code
            if refused_for_length(status, f"{e.code or ''} {e.message}"):
                raise ContextFull(f"the conversation does not fit the model's context ({status}): {e.message}") from e
            if status in (400, 422):
                raise RequestRefused(
                    f"policy server {self.base_url} refused the request ({status}): {e.message}"
                ) from e
            raise PolicyError(f"policy server {self.base_url} failed the request ({status}): {e.message}") from e

    @staticmethod
    def _from_chat(chat: Any) -> list[Completion]:
        out = []
        for choice in sorted(chat.choices, key=lambda c: c.index):
            lp = None
            if choice.logprobs is not None and choice.logprobs.content is not None:
                lp = [float(t.logprob) for t in choice.logprobs.content]
            text = choice.message.content or ""
            calls = _tool_calls(choice.message)
            prompt_ids = _extra(chat, "prompt_token_ids")
            out.append(_completion(choice, text, lp, chat.usage, len(chat.choices), calls, prompt_ids))
        return out

    @staticmethod
    def _from_completions(resp: Any) -> list[Completion]:
        out = []
        for choice in sorted(resp.choices, key=lambda c: c.index):
            lp = None
            if choice.logprobs is not None and choice.logprobs.token_logprobs is not None:
                lp = [float(x) for x in choice.logprobs.token_logprobs]
            out.append(_completion(choice, choice.text, lp, resp.usage, len(resp.choices), []))
        return out
