"""Programs that run inside the sandbox, shipped from their own files (``program_source``)."""

from __future__ import annotations

import functools
from pathlib import Path


@functools.cache
def program_source(name: str) -> str:
    """The source of the in-sandbox program ``name`` (a module of this folder)."""
    path = Path(__file__).with_name(f"{name}.py")
    if not path.is_file():
        raise ValueError(f"no sandbox program {name!r} in {path.parent}")
    return path.read_text()
