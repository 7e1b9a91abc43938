"""A judge model behind any OpenAI-compatible endpoint (vLLM, SGLang, a hosted API, ``dojo policy
serve``), asked for one JSON object that follows a schema.

``JudgeClient.ask(messages, schema)`` posts ``/chat/completions`` with the schema as a strict
``response_format`` (``json_schema``), through ``httpx`` with a bounded timeout per request and a
bounded number of retries (connection errors, timeouts, 429 and 5xx, with a short exponential
backoff). When the endpoint cannot answer, it raises ``JudgeUnavailable``: an infrastructure
failure, which a grader turns into no reward (``None``), never into a 0.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict, Field

from dojo.errors import DojoError, refused_for_length


class JudgeUnavailable(DojoError, RuntimeError):
    """The judge's endpoint failed (or never answered in form): no reward, never a 0."""


class JudgeContextFull(JudgeUnavailable):
    """The judge refused a request for its length (its context cannot hold it). Whose fault that is
    (the judged text's, or the question's and rubric's) the grader finds out (``dojo.rewards.judges``);
    where it cannot, the judge is unavailable."""


class JudgeReplyCut(JudgeUnavailable):
    """The judge's verdict did not fit its ``max_tokens`` (the reply was cut and does not parse), even
    asked for shorter reasons: the judged text made it so (``dojo.rewards.judges`` scores it 0)."""


class JudgeEndpoint(BaseModel):
    """Where the judge is served and how it is asked."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    base_url: str = Field(description="The OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1.")
    model: str | None = Field(None, description="The model to ask for; None: the server's first model.")
    api_key_env: str | None = Field(None, description="Environment variable holding the API key, if one is needed.")
    timeout: float = Field(60.0, gt=0, le=600, description="Seconds one request may take.")
    retries: int = Field(2, ge=0, le=10, description="Retries of a request that failed (connection, 429, 5xx).")
    backoff: float = Field(0.5, ge=0, le=30, description="Seconds before the first retry; doubled for each next one.")
    temperature: float = Field(0.0, ge=0, le=2, description="Sampling temperature (several samples want > 0).")
    max_tokens: int = Field(1024, ge=16, description="Most tokens of one verdict.")


class JudgeClient:
    """Asks one endpoint for schema-shaped JSON. Use as ``async with`` or call ``aclose()``."""

    def __init__(self, endpoint: JudgeEndpoint, *, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.endpoint = endpoint
        self._transport = transport
        self._client: httpx.AsyncClient | None = None
        self._model = endpoint.model
        self.requests = 0

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            headers = {}
            if self.endpoint.api_key_env:
                key = os.environ.get(self.endpoint.api_key_env)
                if not key:
                    raise JudgeUnavailable(f"the judge's API key variable {self.endpoint.api_key_env} is not set")
                headers["Authorization"] = f"Bearer {key}"
            self._client = httpx.AsyncClient(
                base_url=self.endpoint.base_url.rstrip("/") + "/",
                timeout=self.endpoint.timeout,
                headers=headers,
                transport=self._transport,
            )
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def __aenter__(self) -> JudgeClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _request(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        last = ""
        for attempt in range(self.endpoint.retries + 1):
            if attempt:
                await asyncio.sleep(self.endpoint.backoff * 2 ** (attempt - 1))
            try:
                self.requests += 1
                response = await self._http().request(method, path, json=body)
            except httpx.HTTPError as e:
                last = f"{type(e).__name__}: {e}"
                continue
            if response.status_code == 429 or response.status_code >= 500:
                last = f"HTTP {response.status_code}: {response.text[:300]}"
                continue
            if refused_for_length(response.status_code, response.text[:2000]):
                raise JudgeContextFull(
                    f"the judge at {self.endpoint.base_url} refused the request for its length: "
                    f"HTTP {response.status_code}: {response.text[:300]}"
                )
            if response.status_code >= 400:  # the request itself is wrong: retrying will not help
                raise JudgeUnavailable(
                    f"the judge at {self.endpoint.base_url} refused the request: "
                    f"HTTP {response.status_code}: {response.text[:300]}"
                )
            try:
                data = response.json()
            except ValueError:
                last = f"a response that is not JSON: {response.text[:200]!r}"
                continue
            if isinstance(data, dict):
                return data
            last = "a response that is not a JSON object"
        raise JudgeUnavailable(
            f"the judge at {self.endpoint.base_url} failed {self.endpoint.retries + 1} time(s): {last}"
        )

    async def model(self) -> str:
        """The model to ask for: the one configured, else the server's first."""
        if self._model is None:
            models = (await self._request("GET", "models")).get("data") or []
            if not models or not isinstance(models[0], dict) or "id" not in models[0]:
                raise JudgeUnavailable(f"the judge server at {self.endpoint.base_url} serves no model")
            self._model = str(models[0]["id"])
        return self._model

    async def ask(self, messages: list[dict[str, str]], schema: dict[str, Any], name: str = "verdict") -> str:
        """The text of one reply constrained to ``schema`` (its parsing is the caller's)."""
        return (await self.ask_reply(messages, schema, name))[0]

    async def ask_reply(
        self, messages: list[dict[str, str]], schema: dict[str, Any], name: str = "verdict"
    ) -> tuple[str, bool]:
        """``ask``'s text, and whether the reply was cut at ``max_tokens`` (finish_reason "length")."""
        body = {
            "model": await self.model(),
            "messages": messages,
            "temperature": self.endpoint.temperature,
            "max_tokens": self.endpoint.max_tokens,
            "response_format": {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}},
        }
        data = await self._request("POST", "chat/completions", body)
        try:
            choice = data["choices"][0]
            content = choice["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise JudgeUnavailable(
                f"the judge at {self.endpoint.base_url} sent no message: {str(data)[:300]}"
            ) from None
        return (content if isinstance(content, str) else ""), choice.get("finish_reason") == "length"
