"""Programs that run inside the sandbox, shipped from their own files (``program_source``): the
grading harness (``harness``), the simulated-API driver (``api_driver``), the shell check
(``shell_check``), the repo driver and its pytest plugin (``repo_driver``, ``repo_plugin``), the
capture driver of ``analysis`` tasks (``capture_driver``).

The host never imports them: each imports only the standard library, the shared modules it is
shipped with (``dojo.sandbox.bundle``), and (the repo plugin) what the run's environment provides.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from dojo.sandbox import bundle


def program_source(name: str, shared: tuple[ModuleType, ...] = ()) -> str:
    """The source of the in-sandbox program ``name`` (a module of this folder), carrying the
    ``shared`` modules it imports; read once per process."""
    return bundle.program_source(Path(__file__).with_name(f"{name}.py"), shared)
