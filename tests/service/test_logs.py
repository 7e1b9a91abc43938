"""The service's structured logs."""

from __future__ import annotations

import io
import json
import logging
import sys

import pytest

from dojo.service.logs import configure_json_logging


def test_records_go_to_the_stderr_of_the_moment_as_json_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    configure_json_logging()
    first, second = io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "stderr", first)
    logging.getLogger("dojo.service.test").info("one", extra={"fields": {"n": 1}})
    first.close()  # replaced and closed, as a test runner's capture is: later records must not fail
    monkeypatch.setattr(sys, "stderr", second)
    logging.getLogger("dojo.service.test").info("two")
    record = json.loads(second.getvalue())
    assert record["msg"] == "two" and record["logger"] == "dojo.service.test" and record["level"] == "info"
