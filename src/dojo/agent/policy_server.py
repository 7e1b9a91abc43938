"""An OpenAI-compatible server for a local Hugging Face model: ``dojo policy serve MODEL_DIR``.

Serves ``GET /v1/models``, ``POST /v1/chat/completions`` and ``POST /v1/completions`` with the
parameters RL rollouts use (n, temperature, top_p, max_tokens, stop, seed, logprobs, tools), plus
vLLM's ``return_token_ids`` extension (``token_ids`` on each choice, ``prompt_token_ids``: on the
chat response, and on each choice of a text completion), and SGLang's ``POST
/update_weights_from_disk {"model_path": DIR}``, which loads a trainer's saved weights between two
batches (``dojo.agent.weight_sync``). Conversations that continue one of the server's replies are
token-exact (``HFPolicy``).
Tool calls written as ``<tool_call>`` text are returned as OpenAI ``tool_calls`` when the request
offers tools. Streaming is not supported (400). It binds 127.0.0.1 by default; it is meant for
tests, demos and small models on one machine, not as a replacement for vLLM.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any, Literal

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, field_validator

from dojo.agent.hf_policy import HFPolicy
from dojo.agent.policy import Completion, PolicyError, RequestRefused, SamplingParams
from dojo.agent.tool_calls import without_tool_calls


class _Common(BaseModel):
    model_config = ConfigDict(extra="allow")

    model: str | None = None
    n: int = Field(1, ge=1, le=64)
    temperature: float = Field(1.0, ge=0.0, le=10.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    max_tokens: int | None = Field(None, ge=1)
    stop: str | list[str] | None = None
    seed: int | None = None
    stream: bool = False
    return_token_ids: bool = False

    @field_validator("stop")
    @classmethod
    def _stop(cls, v: str | list[str] | None) -> list[str] | None:
        return [v] if isinstance(v, str) else v

    def sampling(self, max_tokens: int | None, logprobs: bool) -> SamplingParams:
        return SamplingParams(
            temperature=self.temperature,
            top_p=self.top_p,
            max_tokens=max_tokens or 256,
            stop=list(self.stop or []),
            seed=self.seed,
            logprobs=logprobs,
        )


class ChatRequest(_Common):
    messages: list[dict[str, Any]] = Field(min_length=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    logprobs: bool | None = None  # (OpenAI's clients may send null for "no")
    top_logprobs: int | None = Field(None, ge=0, le=0, description="Only 0 (no alternatives) is supported.")
    tools: list[dict[str, Any]] | None = None


class WeightsRequest(BaseModel):
    model_config = ConfigDict(extra="allow")

    model_path: str = Field(min_length=1, description="A model directory the server can read.")


class CompletionRequest(_Common):
    prompt: str | list[str]
    logprobs: int | None = Field(None, ge=0, le=1)
    echo: Literal[False] = False


def _error(status: int, message: str, kind: str = "invalid_request_error") -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": kind, "code": status}}, status_code=status)


def _response(kind: str, model: str, choices: list[dict[str, Any]], completions: list[Completion]) -> dict[str, Any]:
    """The OpenAI envelope around ``choices``; ``kind`` is chat.completion or text_completion."""
    prompt = (completions[0].prompt_tokens or 0) if completions else 0
    done = sum(c.num_tokens for c in completions)
    prefix = "chatcmpl" if kind == "chat.completion" else "cmpl"
    return {
        "id": f"{prefix}-{uuid.uuid4().hex}",
        "object": kind,
        "created": int(time.time()),
        "model": model,
        "choices": choices,
        "usage": {"prompt_tokens": prompt, "completion_tokens": done, "total_tokens": prompt + done},
    }


def create_policy_app(policy: HFPolicy, model_name: str | None = None) -> FastAPI:
    """The FastAPI app serving ``policy`` under ``model_name``."""
    name = model_name or policy.name
    app = FastAPI(title="dojo policy server", version="1")
    loaded: dict[str, Any] = {"updates": 0, "path": None}

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'][1:])}: {e['msg']}" for e in exc.errors())
        return _error(400, f"invalid request: {problems}")

    def check(req: _Common) -> JSONResponse | None:
        if req.stream:
            return _error(400, "streaming is not supported by dojo's policy server; set stream=false")
        if req.model is not None and req.model != name:
            return _error(
                404, f"model {req.model!r} is not served here; this server serves {name!r}", "not_found_error"
            )
        return None

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        entry = {"id": name, "object": "model", "created": 0, "owned_by": "dojo", "weight_updates": loaded["updates"]}
        return {"object": "list", "data": [entry]}

    @app.post("/update_weights_from_disk", response_model=None)
    async def update_weights(req: WeightsRequest) -> dict[str, Any] | JSONResponse:
        import asyncio

        try:
            tensors = await asyncio.to_thread(policy.load_weights, req.model_path)
        except (ValueError, OSError) as e:
            return JSONResponse({"success": False, "message": str(e)}, status_code=400)
        loaded["updates"] += 1
        loaded["path"] = req.model_path
        return {"success": True, "message": f"loaded {tensors} tensors from {req.model_path}"}

    @app.post("/v1/chat/completions", response_model=None)
    async def chat(req: ChatRequest) -> dict[str, Any] | JSONResponse:
        if (bad := check(req)) is not None:
            return bad
        try:
            completions = await policy.generate(
                req.messages,
                req.sampling(req.max_completion_tokens or req.max_tokens, bool(req.logprobs)),
                n=req.n,
                tools=req.tools,
            )
        except RequestRefused as e:  # (what the conversation holds: a 400, as vLLM answers it; not a failure)
            return _error(400, str(e))
        except (PolicyError, ValueError, KeyError, TypeError) as e:
            return _error(400 if not isinstance(e, PolicyError) else 500, str(e))
        choices = []
        for i, c in enumerate(completions):
            message: dict[str, Any] = {"role": "assistant", "content": c.text}
            finish = c.finish_reason
            # A reply with a call that does not parse is all content, as vLLM's parsers return it: the
            # client reads the calls from the text, the malformed one included (its error message and
            # penalty). Only the parsed calls had been returned, and the malformed block left out of the
            # content too: the model was told nothing of it (found 2026-12-06).
            if req.tools and (calls := c.tool_calls) and all(t.name != "invalid" for t in calls):
                message["content"] = without_tool_calls(c.text)
                message["tool_calls"] = [
                    {
                        "id": f"call_{uuid.uuid4().hex[:12]}",
                        "type": "function",
                        "function": {"name": t.name, "arguments": json.dumps(t.arguments)},
                    }
                    for t in calls
                ]
                finish = "tool_calls"
            choice: dict[str, Any] = {"index": i, "message": message, "finish_reason": finish, "logprobs": None}
            if req.logprobs and c.logprobs is not None and c.token_ids is not None:
                toks = policy.tokenizer.convert_ids_to_tokens(c.token_ids)
                choice["logprobs"] = {
                    "content": [
                        {"token": t, "logprob": lp, "bytes": None, "top_logprobs": []}
                        for t, lp in zip(toks, c.logprobs, strict=True)
                    ]
                }
            if req.return_token_ids:
                choice["token_ids"] = c.token_ids
            choices.append(choice)
        response = _response("chat.completion", name, choices, completions)
        if req.return_token_ids and completions:
            response["prompt_token_ids"] = completions[0].prompt_token_ids
        return response

    @app.post("/v1/completions", response_model=None)
    async def complete(req: CompletionRequest) -> dict[str, Any] | JSONResponse:
        if (bad := check(req)) is not None:
            return bad
        prompts = [req.prompt] if isinstance(req.prompt, str) else req.prompt
        if len(prompts) != 1:
            return _error(400, "send one prompt per request (a list of exactly one string)")
        try:
            completions = await policy.complete(prompts[0], req.sampling(req.max_tokens, bool(req.logprobs)), n=req.n)
        except PolicyError as e:
            return _error(500, str(e), "server_error")
        except ValueError as e:  # the prompt is empty, or does not fit the model's context (ContextFull)
            return _error(400, str(e))
        choices = []
        for i, c in enumerate(completions):
            choice: dict[str, Any] = {"index": i, "text": c.text, "finish_reason": c.finish_reason, "logprobs": None}
            if req.logprobs and c.logprobs is not None and c.token_ids is not None:
                choice["logprobs"] = {
                    "tokens": policy.tokenizer.convert_ids_to_tokens(c.token_ids),
                    "token_logprobs": c.logprobs,
                    "top_logprobs": None,
                    "text_offset": None,
                }
            if req.return_token_ids:
                choice["token_ids"] = c.token_ids
                choice["prompt_token_ids"] = c.prompt_token_ids
            choices.append(choice)
        return _response("text_completion", name, choices, completions)

    return app
