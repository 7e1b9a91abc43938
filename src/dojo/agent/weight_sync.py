"""Keeping a served policy's weights equal to the trainer's.

``ServedWeights(base_url, directory).push(model, tokenizer)`` saves the trainer's current model to
``directory`` (safetensors, on a disk the server can read: the same machine or a shared mount) and
asks the server to load it, through SGLang's endpoint ``POST /update_weights_from_disk
{"model_path": ...}``, which ``dojo policy serve`` also serves. The call returns once the server has
the new weights, so the next request samples from them. A failure is a ``PolicyError``: the step
does not run on stale weights silently.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from dojo.agent.policy import PolicyError


class ServedWeights:
    """Pushes a model's weights to policy servers (``base_url``: one URL or several, with or
    without ``/v1``). With several, a server that fails to load them is left out of ``loaded``
    (a ``PolicyPool`` then sends it nothing: it would sample from stale weights); only when no
    server loads them is the push a ``PolicyError``."""

    def __init__(self, base_url: str | Sequence[str], directory: str | Path, *, timeout: float = 300.0) -> None:
        urls = [base_url] if isinstance(base_url, str) else list(base_url)
        if not urls:
            raise ValueError("ServedWeights needs at least one server URL")
        for url in urls:
            if not url.startswith(("http://", "https://")):
                raise ValueError(f"base_url must be an http(s) URL, got {url!r}")
        self.base_urls = [server_root(u) for u in urls]
        self.base_url = self.base_urls[0]
        self.directory = Path(directory)
        self.timeout = timeout
        self.pushes = 0
        self.loaded: list[str] = []  # the servers that hold the latest weights (their root URLs)
        self.failed: dict[str, str] = {}  # server root URL -> why the latest push did not reach it

    def push(self, model: Any, tokenizer: Any = None) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        model.save_pretrained(self.directory, safe_serialization=True)
        if tokenizer is not None:
            tokenizer.save_pretrained(self.directory)
        self.loaded, self.failed = [], {}
        for base in self.base_urls:
            try:
                self._load(base)
            except PolicyError as e:
                self.failed[base] = str(e)
            else:
                self.loaded.append(base)
        if not self.loaded:
            raise PolicyError("; ".join(self.failed.values()))
        self.pushes += 1

    def _load(self, base: str) -> None:
        url = f"{base}/update_weights_from_disk"
        try:
            response = httpx.post(url, json={"model_path": str(self.directory.resolve())}, timeout=self.timeout)
        except httpx.HTTPError as e:
            raise PolicyError(f"cannot push weights to {url}: {e}") from e
        body = response.json() if response.headers.get("content-type", "").startswith("application/json") else {}
        if response.status_code != 200 or not body.get("success", False):
            raise PolicyError(f"{url} did not load the weights ({response.status_code}): {body or response.text}")


def server_root(url: str) -> str:
    """A server's URL without a trailing ``/`` or ``/v1``: what names one server across APIs."""
    return url.rstrip("/").removesuffix("/v1")
