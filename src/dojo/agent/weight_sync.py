"""Keeping a served policy's weights equal to the trainer's.

``ServedWeights(base_url, directory).push(model, tokenizer)`` saves the trainer's current model to
``directory`` (safetensors, on a disk the server can read: the same machine or a shared mount) and
asks the server to load it, through SGLang's endpoint ``POST /update_weights_from_disk
{"model_path": ...}``, which ``dojo policy serve`` also serves. The call returns once the server has
the new weights, so the next request samples from them. A failure is a ``PolicyError``: the step
does not run on stale weights silently.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from dojo.agent.policy import PolicyError


class ServedWeights:
    """Pushes a model's weights to a policy server (``base_url`` with or without ``/v1``)."""

    def __init__(self, base_url: str, directory: str | Path, *, timeout: float = 300.0) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must be an http(s) URL, got {base_url!r}")
        self.base_url = base_url.rstrip("/").removesuffix("/v1")
        self.directory = Path(directory)
        self.timeout = timeout
        self.pushes = 0

    def push(self, model: Any, tokenizer: Any = None) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        model.save_pretrained(self.directory, safe_serialization=True)
        if tokenizer is not None:
            tokenizer.save_pretrained(self.directory)
        url = f"{self.base_url}/update_weights_from_disk"
        try:
            response = httpx.post(url, json={"model_path": str(self.directory.resolve())}, timeout=self.timeout)
        except httpx.HTTPError as e:
            raise PolicyError(f"cannot push weights to {url}: {e}") from e
        body = response.json() if response.headers.get("content-type", "").startswith("application/json") else {}
        if response.status_code != 200 or not body.get("success", False):
            raise PolicyError(f"{url} did not load the weights ({response.status_code}): {body or response.text}")
        self.pushes += 1
