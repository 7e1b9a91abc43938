"""A local Hugging Face causal LM as a policy (CPU or GPU): what ``dojo train`` samples from, what
held-out evaluation runs, and the model behind ``dojo policy serve`` (``dojo.agent.policy_server``).

Two things make it fit for RL rather than only for chat:

- **Batching.** Episodes call ``generate`` one conversation at a time, concurrently; the requests
  that arrive while the model is busy (or within ``batch_window`` seconds of an idle model) run as
  one padded ``model.generate``. A GRPO step's 96 first turns are one forward pass per token, not 96.
- **Token-exact turns.** A reply's tokens are the ones sampled, never re-tokenized: when a
  conversation continues after one of this policy's replies, its prompt is the ids that reply was
  conditioned on, the sampled ids, and then the rendering of what came after. Each ``Completion``
  carries ``prompt_token_ids``, so an episode's turns chain into one token sequence
  (``dojo.agent.tokens``) that a trainer can compute the loss on. (Two replies that decode to the
  same text but were sampled as different ids share one entry; the chain check catches the rare
  episode this affects.)

Prompts render by the tokenizer's chat template (``prompt_format="chat"``), or, for models trained
on plain prompts like dojo's warm-started tiny model, as text (``"text"``: the prompt's messages
joined by blank lines, each reply appended as sampled, each later user or tool message as
``"\\n\\n<content>\\n\\n"``). Logprobs are the model's raw log-softmax of each sampled token, as
vLLM reports them by default. The model is used in place: a trainer that updates it changes what
the next batch samples.
"""

from __future__ import annotations

import asyncio
import collections
import inspect
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from dojo.agent.chat_turns import text_after_reply
from dojo.agent.policy import (
    Completion,
    ContextFull,
    PolicyError,
    RequestRefused,
    SamplingParams,
    context_full_message,
)
from dojo.agent.tool_calls import parse_tool_calls

PromptFormat = Literal["chat", "text"]
_MEMO_LIMIT = 1 << 16  # replies remembered for token-exact continuation


@dataclass
class _Request:
    prompt_ids: list[int]
    params: SamplingParams
    n: int
    future: asyncio.Future[list[Completion]] = field(repr=False)


class HFPolicy:
    """Samples from a local ``AutoModelForCausalLM`` (nothing is downloaded)."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        name: str = "local",
        prompt_format: PromptFormat | None = None,
        batch_window: float = 0.005,
        max_batch: int = 256,
    ) -> None:
        has_template = getattr(tokenizer, "chat_template", None) is not None
        if prompt_format is None:
            prompt_format = "chat" if has_template else "text"
        if prompt_format not in ("chat", "text"):
            raise ValueError(f"prompt_format must be 'chat' or 'text', not {prompt_format!r}")
        if prompt_format == "chat" and not has_template:
            raise ValueError("prompt_format='chat' needs a tokenizer with a chat template; use prompt_format='text'")
        if batch_window < 0 or max_batch < 1:
            raise ValueError("batch_window must be >= 0 and max_batch >= 1")
        self.model = model
        self.tokenizer = tokenizer
        self.name = name
        self.prompt_format: PromptFormat = prompt_format
        self.batch_window = batch_window
        self.max_batch = max_batch
        self._lock = threading.Lock()  # one generate (or weight load) at a time
        self._queue: list[_Request] = []
        self._drainer: asyncio.Task[None] | None = None
        self._replies: collections.OrderedDict[str, tuple[list[int], bool]] = collections.OrderedDict()

    @classmethod
    def from_dir(
        cls, model_dir: str | Path, *, device: str = "cpu", prompt_format: PromptFormat | None = None
    ) -> HFPolicy:
        from transformers import AutoModelForCausalLM, AutoTokenizer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]

        path = Path(model_dir)
        if not (path / "config.json").is_file():
            raise ValueError(f"{path} is not a model directory (no config.json); build one with `dojo policy tiny DIR`")
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True)
        model = model.to(device)  # type: ignore[arg-type]
        model.eval()
        return cls(model, tokenizer, name=path.name, prompt_format=prompt_format)

    def load_weights(self, model_dir: str | Path) -> int:
        """Replace the model's weights with those saved in ``model_dir`` (same architecture), between
        two batches; returns how many tensors were loaded. What a trainer calls to sync a served policy."""
        from transformers import AutoModelForCausalLM

        path = Path(model_dir)
        if not (path / "config.json").is_file():
            raise ValueError(f"{path} is not a model directory (no config.json)")
        fresh = AutoModelForCausalLM.from_pretrained(path, local_files_only=True, dtype=self.model.dtype)
        state = fresh.state_dict()
        mine = self.model.state_dict()
        if set(state) != set(mine) or any(state[k].shape != mine[k].shape for k in mine):
            raise ValueError(f"the weights in {path} do not fit the served model (another architecture or size)")
        with self._lock:
            self.model.load_state_dict(state)
        return len(state)

    # -- conversation → token ids ---------------------------------------------------------------

    def render(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> str:
        """The prompt text for a conversation (with the generation prompt, in chat format)."""
        if self.prompt_format == "text":
            return render_text(messages)
        kwargs: dict[str, Any] = {"tools": tools} if tools else {}
        text = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False, **kwargs)
        return str(text)

    def _head(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> str:
        """The text of a conversation that ends with an assistant reply, up to the reply's last character."""
        if self.prompt_format == "text":
            return render_text(messages)
        *before, reply = messages
        return self.render(before, tools) + str(reply.get("content") or "")

    def _after(
        self, messages: list[dict[str, Any]], j: int, tools: list[dict[str, Any]] | None, ended_with_eos: bool
    ) -> str:
        """The text after the reply ``messages[j]`` up to the next reply."""
        if self.prompt_format == "text":
            return render_text(messages)[len(render_text(messages[: j + 1])) :]
        return text_after_reply(self.tokenizer, messages, j, ended_with_eos=ended_with_eos, tools=tools)

    def _encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def prompt_ids(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> list[int]:
        """The ids the model conditions on for ``messages``: the latest of this policy's replies in
        the conversation as its sampled ids, then the rendering of what follows it."""
        for j in range(len(messages) - 1, -1, -1):
            m = messages[j]
            if m.get("role") != "assistant":
                continue
            if m.get("tool_calls"):
                break  # a template re-renders native tool calls: no exact continuation, render it all
            known = self._replies.get(self._head(messages[: j + 1], tools))
            if known is None:
                break
            ids, ended_with_eos = known
            try:
                return ids + self._encode(self._after(messages, j, tools, ended_with_eos))
            except ValueError:  # a template that re-renders earlier turns: render it all
                break
        return self._encode(self.render(messages, tools))

    def _remember(self, head: str, ids: list[int], ended_with_eos: bool) -> None:
        self._replies[head] = (ids, ended_with_eos)
        self._replies.move_to_end(head)
        while len(self._replies) > _MEMO_LIMIT:
            self._replies.popitem(last=False)

    # -- sampling -------------------------------------------------------------------------------

    async def generate(
        self,
        messages: list[dict[str, Any]],
        params: SamplingParams,
        *,
        n: int = 1,
        tools: list[dict[str, Any]] | None = None,
    ) -> list[Completion]:
        if not messages:
            raise ValueError("messages must not be empty")
        from jinja2 import TemplateError  # (transformers' chat templates are jinja2's)

        try:
            ids = self.prompt_ids(messages, tools)
        except TemplateError as e:
            # A template that refuses what the conversation holds (its ``raise_exception``: Llama-3.1's
            # "only supports single tool-calls at once" for a reply of two) is refused as a server
            # refuses it (vLLM: a 400); it had escaped the episode as jinja2's error and stopped the
            # rollout (found 2026-12-06). A template that is broken (a syntax error, an undefined name:
            # a subclass) is the set-up's failure, not the policy's.
            if type(e) is TemplateError:
                raise RequestRefused(f"the chat template refused the conversation: {e}") from e
            raise PolicyError(f"the chat template failed: {type(e).__name__}: {e}") from e
        completions = await self.complete_ids(ids, params, n=n)
        if not params.stop:  # a stop string cuts the text short of the ids: no exact continuation
            for c in completions:
                head = self._head([*messages, {"role": "assistant", "content": c.text}], tools)
                sampled = list(c.token_ids or [])
                self._remember(head, list(ids) + sampled, sampled[-1:] == [self.tokenizer.eos_token_id])
        if tools:
            completions = [c.model_copy(update={"tool_calls": parse_tool_calls(c.text)}) for c in completions]
        return completions

    async def complete(self, prompt: str, params: SamplingParams, *, n: int = 1) -> list[Completion]:
        """Sample ``n`` continuations of a raw prompt string."""
        return await self.complete_ids(self._encode(prompt), params, n=n)

    async def complete_ids(self, prompt_ids: list[int], params: SamplingParams, *, n: int = 1) -> list[Completion]:
        """Sample ``n`` continuations of ``prompt_ids``, batched with the other requests waiting."""
        if n < 1:
            raise ValueError("n must be at least 1")
        if not prompt_ids:
            raise ValueError("the prompt is empty")
        limit = getattr(self.model.config, "max_position_embeddings", None)
        if limit is not None and len(prompt_ids) >= int(limit):  # (as vLLM refuses it: a 400)
            raise ContextFull(context_full_message(int(limit), len(prompt_ids)))
        future: asyncio.Future[list[Completion]] = asyncio.get_running_loop().create_future()
        self._queue.append(_Request(list(prompt_ids), params, n, future))
        if self._drainer is None or self._drainer.done():
            self._drainer = asyncio.create_task(self._drain())
        return await future

    async def _drain(self) -> None:
        await asyncio.sleep(self.batch_window)
        while self._queue:
            batch, self._queue = self._queue[: self.max_batch], self._queue[self.max_batch :]
            by_params: dict[str, list[_Request]] = {}
            for req in batch:
                by_params.setdefault(req.params.model_dump_json(), []).append(req)
            for requests in by_params.values():
                try:
                    results = await asyncio.to_thread(self._generate_batch, requests, requests[0].params)
                except Exception as e:  # every waiter gets the failure; the drainer goes on
                    error = e if isinstance(e, PolicyError) else PolicyError(f"local generation failed: {e}")
                    for req in requests:
                        if not req.future.done():
                            req.future.set_exception(error)
                    continue
                for req, result in zip(requests, results, strict=True):
                    if not req.future.done():
                        req.future.set_result(result)

    def _generate_batch(self, requests: list[_Request], params: SamplingParams) -> list[list[Completion]]:
        """One padded ``model.generate`` for every request (each prompt ``n`` times)."""
        import torch

        limit = getattr(self.model.config, "max_position_embeddings", None)  # (each prompt fits: complete_ids)
        out: list[list[Completion]] = [[] for _ in requests]
        greedy = params.temperature == 0.0
        rows = [(i, r.prompt_ids) for i, r in enumerate(requests) for _ in range(1 if greedy else r.n)]
        width = max(len(ids) for _, ids in rows)
        max_new = params.max_tokens if limit is None else min(params.max_tokens, int(limit) - width)
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.tokenizer.eos_token_id
        with self._lock:
            device = self.model.device
            input_ids = torch.tensor([[pad] * (width - len(ids)) + ids for _, ids in rows], device=device)
            attention = torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for _, ids in rows], device=device)
            gen: dict[str, Any] = {
                "max_new_tokens": max(1, max_new),
                "do_sample": not greedy,
                "return_dict_in_generate": True,
                "output_logits": True,
                "pad_token_id": pad,
                "eos_token_id": self.tokenizer.eos_token_id,
            }
            if not greedy:
                gen.update(temperature=params.temperature, top_p=params.top_p, top_k=0)
            if params.stop:
                gen.update(stop_strings=params.stop, tokenizer=self.tokenizer)
            if params.seed is not None:
                torch.manual_seed(params.seed)
            was_training = self.model.training
            self.model.eval()
            try:
                with torch.no_grad():
                    gen.update(self._shared_prefill(input_ids, attention))
                    result = self.model.generate(input_ids=input_ids, attention_mask=attention, **gen)
                    logits = torch.stack(result.logits, dim=1).float()
                    chosen = result.sequences[:, width:]
                    logprobs = torch.log_softmax(logits, dim=-1).gather(-1, chosen.unsqueeze(-1)).squeeze(-1)
            finally:
                self.model.train(was_training)
        for row, (i, ids) in enumerate(rows):
            out[i].append(self._completion(chosen[row].tolist(), logprobs[row].tolist(), ids, params))
        if greedy:  # one row per request: its n completions are the same
            for i, r in enumerate(requests):
                out[i] = out[i] * r.n
        return out

    def _shared_prefill(self, input_ids: Any, attention: Any) -> dict[str, Any]:
        """The KV cache of the batch's prompts but their last token, each distinct prompt computed once
        and copied to its rows, for ``generate`` to go on from (``{}`` when no prompt repeats).

        A GRPO group is one prompt sampled ``group_size`` times: computing it once per group cut the
        generation of the embedded default's step (12 prompts x 8) from 441 to 164 ms of CPU, with
        the same sampled tokens (logits equal to ~5e-6; ``bench/generate_prefill.py``)."""
        import torch
        from transformers import DynamicCache

        first: dict[tuple[int, ...], int] = {}
        rows = [first.setdefault(tuple(row), len(first)) for row in input_ids.tolist()]
        if len(first) == len(rows) or input_ids.shape[1] < 2:
            return {}
        distinct = torch.tensor([rows.index(k) for k in range(len(first))], device=input_ids.device)
        ids, mask = input_ids[distinct, :-1], attention[distinct, :-1]
        positions = (mask.cumsum(-1) - 1).clamp(min=0)  # left padding: each prompt's own positions, as generate's
        name = "cache" if "cache" in inspect.signature(self.model.forward).parameters else "past_key_values"
        cache = DynamicCache(config=self.model.config)
        self.model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True, **{name: cache})
        cache.reorder_cache(torch.tensor(rows, device=input_ids.device))  # type: ignore[arg-type]
        return {name: cache}

    def _completion(
        self, ids: list[int], lps: list[float], prompt_ids: list[int], params: SamplingParams
    ) -> Completion:
        eos, pad = self.tokenizer.eos_token_id, self.tokenizer.pad_token_id
        finish = "length"
        kept = len(ids)
        for i, tok in enumerate(ids):
            if tok in (eos, pad):  # the sampled terminator stays in the record (a trainer needs it)
                kept, finish = i + 1, "stop"
                break
        ids, lps = ids[:kept], lps[:kept]
        text = self.tokenizer.decode(ids, skip_special_tokens=True)
        for s in params.stop:
            cut = text.find(s)
            if cut >= 0:
                text, finish = text[:cut], "stop"
        return Completion(
            text=text,
            finish_reason=finish,
            token_ids=ids,
            logprobs=lps,
            prompt_token_ids=prompt_ids,
            prompt_tokens=len(prompt_ids),
            completion_tokens=len(ids),
        )


def render_text(messages: list[dict[str, Any]]) -> str:
    """The plain-text format: leading messages joined by blank lines, replies as they are, later
    user or tool messages as ``"\\n\\n<content>\\n\\n"``."""
    i = 0
    lead: list[str] = []
    while i < len(messages) and messages[i].get("role") != "assistant":
        lead.append(str(messages[i].get("content") or ""))
        i += 1
    text = "\n\n".join(lead)
    for m in messages[i:]:
        content = str(m.get("content") or "")
        text += content if m.get("role") == "assistant" else f"\n\n{content}\n\n"
    return text
