"""Structured logs: one JSON object per line."""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

ACCESS_LOGGER = "dojo.service.access"


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        payload: dict[str, Any] = {
            "ts": round(time.time(), 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        extra = getattr(record, "fields", None)
        if isinstance(extra, dict):
            payload.update(extra)
        if record.exc_info:
            payload["exc"] = self.formatException(record.exc_info)
        return json.dumps(payload, default=str)


class StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes each record to ``sys.stderr`` as it is then, not as it was when logging was configured
    (a stream replaced and closed since, as pytest's capture does, made every later record a
    "Logging error" traceback)."""

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:  # StreamHandler.__init__ sets it: always sys.stderr here
        pass


def configure_json_logging(level: int = logging.INFO) -> None:
    handler = StderrHandler()
    handler.setFormatter(JsonFormatter())
    for name in ("dojo", "uvicorn.error"):
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler]
        logger.setLevel(level)
        logger.propagate = False
