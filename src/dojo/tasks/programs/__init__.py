"""Programs that run inside the sandbox for ``dojo.tasks``, shipped from their own files
(``program_source``): the ops family's service (``ops_service``, a file of the task's tree), the
tau2 adapter (``tau2_adapter``, written into tau2's environment).

The host never imports them: each imports only the standard library, the shared modules it is
shipped with (``dojo.sandbox.bundle``), and (the tau2 adapter) what its environment provides.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from dojo.sandbox import bundle


def program_source(name: str, shared: tuple[ModuleType, ...] = ()) -> str:
    """The source of the in-sandbox program ``name`` (a module of this folder), carrying the
    ``shared`` modules it imports; read once per process."""
    return bundle.program_source(Path(__file__).with_name(f"{name}.py"), shared)
