"""Runs inside the sandbox, never on the host: ``/run_jupyter``'s driver (``dojo.service.jupyter``).

It reads the request (``{"kernel", "cells", "cell_timeout", "result"}``) as JSON on stdin, starts a
Jupyter kernel of the run's own Python environment (its connection on the run's private
loopback), runs the cells one after another in it, and writes what each printed, displayed and
raised to the file ``result`` names as JSON (``{"status", "cells"}``), as SandboxFusion's jupyter
runner does. It prints
nothing on stdout: the service reads the file, and the kernel's own output stays out of it.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from jupyter_client.manager import start_new_kernel  # type: ignore[import-not-found,unused-ignore]

KERNEL_START_TIMEOUT_S = 60


def run_cell(client: Any, code: str, timeout: float | None) -> dict[str, Any]:
    """One cell: its stdout and stderr, its displays (rich outputs and the last expression's
    value) and its error, as the kernel sent them."""
    cell: dict[str, Any] = {"stdout": "", "stderr": "", "display": [], "error": []}

    def hook(message: dict[str, Any]) -> None:
        kind = message["header"]["msg_type"]
        content = message["content"]
        if kind == "stream":
            cell[content["name"]] += content["text"]
        elif kind in ("display_data", "execute_result"):
            cell["display"].append(content["data"])
        elif kind == "error":
            cell["error"].append(content)

    client.execute_interactive(code, output_hook=hook, timeout=timeout)
    return cell


def main() -> None:
    request = json.load(sys.stdin)
    cells: list[dict[str, Any]] = []
    status = "Error"  # unless every cell ran, or one ran past its time
    manager, client = start_new_kernel(kernel_name=request["kernel"], startup_timeout=KERNEL_START_TIMEOUT_S)
    try:
        for code in request["cells"]:
            cells.append(run_cell(client, code, request["cell_timeout"] or None))
        status = "Finished"
    except TimeoutError:
        status = "TimeLimitExceeded"
    finally:
        os.makedirs(os.path.dirname(request["result"]), exist_ok=True)
        with open(request["result"], "w") as f:
            json.dump({"status": status, "cells": cells}, f)
        client.stop_channels()
        manager.shutdown_kernel(now=True)


if __name__ == "__main__":
    main()
