"""Runs inside the sandbox, never on the host: ``/run_jupyter``'s driver (``dojo.service.jupyter``).

It reads the request (``{"kernel", "cells", "cell_timeout", "run", "key"}``) as JSON on stdin,
starts a Jupyter kernel of the run's own Python environment (its connection on the run's private
loopback), runs the cells one after another in it, and reports what each printed, displayed and
raised (``{"status", "cells"}``, as SandboxFusion's jupyter runner does) as one signed record on
the run's stdout: ``RUN MAC PAYLOAD``, the MAC an HMAC-SHA256 of the payload under ``key``.

The kernel runs the cells' code, so every process it starts is the candidate's, of the driver's
uid, and may outlive the cells. Nothing of theirs can reach the record:

- the run's stdout is held by this process alone, on a descriptor that no child inherits: fd 1
  becomes the run's stderr before the kernel starts (the kernel's own output goes there);
- this process is not dumpable, so a process of its uid can neither open its descriptors through
  ``/proc/<pid>/fd`` nor read its memory (``/proc/<pid>/mem``, ``environ``; ``ptrace`` is also the
  syscall filter's): the key, which came on stdin, is nowhere else in the run;
- it imports only from folders no process of the run can write (``/box`` and ``/tmp`` are left off
  its path), so a module a cell plants is never code of this process;
- the channel is closed once the record is written.

A process of the run can still kill or stop this one (same uid): then there is no record, and the
service reports the cells as failed.
"""

from __future__ import annotations

import ctypes
import hashlib
import hmac
import json
import os
import sys
from typing import Any

from dojo.sandbox.guest.trusted import make_undumpable, use_trusted_path

KERNEL_START_TIMEOUT_S = 60


def sign(run: str, key: bytes, payload: str) -> bytes:
    """The record the service accepts: ``RUN MAC PAYLOAD`` (the payload ASCII JSON, one line)."""
    mac = hmac.new(key, payload.encode(), hashlib.sha256).hexdigest()
    return f"{run} {mac} {payload}".encode()


def seal() -> int:
    """Make this process unreachable from the kernel it is about to start (see the module's doc);
    returns the channel: the run's stdout, on a descriptor no child inherits."""
    libc = ctypes.CDLL(None, use_errno=True)
    if not make_undumpable(libc):
        raise OSError(ctypes.get_errno(), "the driver could not make itself non-dumpable")
    channel = os.dup(1)  # (close-on-exec, as every descriptor Python opens)
    os.dup2(2, 1)  # fd 1, which the kernel inherits: the run's stderr
    use_trusted_path()
    return channel


def report(channel: int, record: bytes) -> None:
    """Write the record whole, and close the channel."""
    try:
        view = memoryview(record)
        while view:
            view = view[os.write(channel, view) :]
    finally:
        os.close(channel)


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
    channel = seal()
    request = json.load(sys.stdin)
    run, key = request["run"], bytes.fromhex(request.pop("key"))
    ipython = os.environ.get("IPYTHONDIR")
    if ipython:  # (IPython warns when the folder above its own does not exist)
        os.makedirs(os.path.dirname(ipython), exist_ok=True)
    from jupyter_client.manager import start_new_kernel  # type: ignore[import-not-found,unused-ignore]

    cells: list[dict[str, Any]] = []
    status = "Error"  # unless every cell ran, or one ran past its time
    manager = client = None
    try:
        manager, client = start_new_kernel(kernel_name=request["kernel"], startup_timeout=KERNEL_START_TIMEOUT_S)
        for code in request["cells"]:
            cells.append(run_cell(client, code, request["cell_timeout"] or None))
        status = "Finished"
    except TimeoutError:
        status = "TimeLimitExceeded"
    finally:
        report(channel, sign(run, key, json.dumps({"status": status, "cells": cells})))
        if client is not None:
            client.stop_channels()
        if manager is not None:
            manager.shutdown_kernel(now=True)


if __name__ == "__main__":
    main()
