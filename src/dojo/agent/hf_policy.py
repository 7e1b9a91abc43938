"""A local Hugging Face causal LM as a policy (CPU or GPU), and the same model behind
``dojo policy serve`` (``dojo.agent.policy_server``).

Generation runs in a worker thread, one request at a time (a model is not shared between
concurrent ``generate`` calls). Logprobs are the model's raw log-softmax of each sampled token,
as vLLM reports them by default.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

from dojo.agent.policy import Completion, PolicyError, SamplingParams
from dojo.agent.tool_calls import parse_tool_calls


class HFPolicy:
    """Samples from a local ``AutoModelForCausalLM`` directory (nothing is downloaded)."""

    def __init__(self, model: Any, tokenizer: Any, *, name: str = "local") -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.name = name
        self._lock = threading.Lock()
        self._async_lock: asyncio.Lock | None = None

    @classmethod
    def from_dir(cls, model_dir: str | Path, *, device: str = "cpu") -> HFPolicy:
        from transformers import AutoModelForCausalLM, AutoTokenizer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]

        path = Path(model_dir)
        if not (path / "config.json").is_file():
            raise ValueError(f"{path} is not a model directory (no config.json); build one with `dojo policy tiny DIR`")
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True)
        model = model.to(device)  # type: ignore[arg-type]
        model.eval()
        return cls(model, tokenizer, name=path.name)

    def render(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> str:
        """The prompt text for a conversation, by the tokenizer's chat template."""
        if getattr(self.tokenizer, "chat_template", None) is None:
            return "".join(f"{m['role']}: {m.get('content') or ''}\n" for m in messages) + "assistant: "
        kwargs: dict[str, Any] = {"tools": tools} if tools else {}
        text = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False, **kwargs)
        return str(text)

    async def generate(
        self,
        messages: list[dict[str, Any]],
        params: SamplingParams,
        *,
        n: int = 1,
        tools: list[dict[str, Any]] | None = None,
    ) -> list[Completion]:
        prompt = self.render(messages, tools)
        completions = await self.complete(prompt, params, n=n)
        if tools:
            completions = [c.model_copy(update={"tool_calls": parse_tool_calls(c.text)}) for c in completions]
        return completions

    async def complete(self, prompt: str, params: SamplingParams, *, n: int = 1) -> list[Completion]:
        """Sample ``n`` continuations of a raw prompt string."""
        if self._async_lock is None:
            self._async_lock = asyncio.Lock()
        async with self._async_lock:
            return await asyncio.to_thread(self.complete_sync, prompt, params, n)

    def complete_sync(self, prompt: str, params: SamplingParams, n: int = 1) -> list[Completion]:
        import torch

        if n < 1:
            raise ValueError("n must be at least 1")
        with self._lock:
            try:
                enc = self.tokenizer(prompt, return_tensors="pt", add_special_tokens=False)
                enc = {k: v.to(self.model.device) for k, v in enc.items()}
                prompt_len = int(enc["input_ids"].shape[1])
                limit = getattr(self.model.config, "max_position_embeddings", None)
                max_new = params.max_tokens
                if limit is not None:
                    max_new = min(max_new, int(limit) - prompt_len)
                    if max_new < 1:
                        return [
                            Completion(
                                text="",
                                finish_reason="length",
                                token_ids=[],
                                logprobs=[],
                                prompt_tokens=prompt_len,
                                completion_tokens=0,
                            )
                        ] * n
                greedy = params.temperature == 0.0
                gen: dict[str, Any] = {
                    "max_new_tokens": max_new,
                    "do_sample": not greedy,
                    "num_return_sequences": 1 if greedy else n,
                    "return_dict_in_generate": True,
                    "output_logits": True,
                    "pad_token_id": self.tokenizer.pad_token_id,
                    "eos_token_id": self.tokenizer.eos_token_id,
                }
                if not greedy:
                    gen.update(temperature=params.temperature, top_p=params.top_p, top_k=0)
                if params.stop:
                    gen.update(stop_strings=params.stop, tokenizer=self.tokenizer)
                if params.seed is not None:
                    torch.manual_seed(params.seed)
                with torch.no_grad():
                    out = self.model.generate(**enc, **gen)
                    logits = torch.stack(out.logits, dim=1).float()
                    chosen = out.sequences[:, prompt_len:]
                    logprobs = torch.log_softmax(logits, dim=-1).gather(-1, chosen.unsqueeze(-1)).squeeze(-1)
            except (RuntimeError, ValueError) as e:
                raise PolicyError(f"local generation failed: {e}") from e
        results = [
            self._completion(chosen[i].tolist(), logprobs[i].tolist(), prompt_len, params) for i in range(len(chosen))
        ]
        return results * n if greedy else results

    def _completion(self, ids: list[int], lps: list[float], prompt_len: int, params: SamplingParams) -> Completion:
        eos, pad = self.tokenizer.eos_token_id, self.tokenizer.pad_token_id
        finish = "length"
        kept = len(ids)
        for i, tok in enumerate(ids):
            if tok == eos:
                kept, finish = i + 1, "stop"
                break
            if tok == pad and pad != eos:
                kept, finish = i, "stop"
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
            prompt_tokens=prompt_len,
            completion_tokens=len(ids),
        )
