"""Where dojo keeps what it builds on this machine: ``$DOJO_HOME``, default ``~/.cache/dojo``."""

from __future__ import annotations

import os
from pathlib import Path


def dojo_home() -> Path:
    home = os.environ.get("DOJO_HOME")
    return Path(home) if home else Path.home() / ".cache" / "dojo"
