"""`dojo serve`: run the service with uvicorn, refusing unsafe bind configurations."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import faulthandler
import os
import signal
import socket
import sys

import uvicorn

from dojo.errors import InputError
from dojo.sandbox import SandboxAPI
from dojo.sandbox.environment import EnvironmentNotFound, EnvironmentStore
from dojo.service.app import ServiceSettings, create_app
from dojo.service.fusion import FUSION_ENVIRONMENT, build_command
from dojo.service.logs import configure_json_logging
from dojo.service.loopback import guarded, is_loopback


class UnsafeBind(InputError):
    """A non-loopback bind without a token."""


def check_bind(host: str, token: str | None) -> None:
    if not is_loopback(host) and not token:
        raise UnsafeBind(
            f"refusing to bind {host} without a token: anyone who can reach it could run code on this machine. "
            "Pass --token (or set DOJO_TOKEN), or bind 127.0.0.1."
        )


def check_port(host: str, port: int) -> None:
    """An InputError now where another process holds ``host:port`` (uvicorn had said so only after
    the sandbox had started, in a log line; the dashboard had first printed its address, which
    pointed at whatever held the port). A port in TIME_WAIT is free (SO_REUSEADDR, as uvicorn)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                raise InputError(f"port {port} on {host} is in use by another process: pick another --port") from None
            raise InputError(f"cannot bind {host}:{port}: {e.strerror or e}") from None


def fusion_environment(name: str | None, store: EnvironmentStore) -> tuple[str | None, str | None]:
    """The environment /run_code's Python runs use (``dojo serve --fusion-environment``), and a note
    for the operator when there is none. ``None`` means SandboxFusion's (``sandboxfusion``) where it
    is built here, else the bare interpreter; ``"none"`` the bare interpreter. A name that is not
    built here is an InputError that says how to build it."""
    if name == "none":
        return None, None
    if name is None:
        try:
            store.get(FUSION_ENVIRONMENT)
        except EnvironmentNotFound:
            return None, (
                f"/run_code runs Python on the sandbox's bare interpreter: no {FUSION_ENVIRONMENT!r} environment "
                "is built here (SandboxFusion's image has ~100 packages, requests, numpy and pandas among them); "
                f"build it with: make fusion-env, or {build_command()}"
            )
        return FUSION_ENVIRONMENT, None
    try:
        store.get(name)
    except EnvironmentNotFound as e:
        raise InputError(
            f"--fusion-environment {name}: {e}; for SandboxFusion's packages under that name: {build_command(name)}"
        ) from None
    return name, None


def dump_stacks_on(signum: int) -> bool:
    """``kill -USR1 PID`` writes every thread's stack to the service's stderr (its log), and the
    service goes on. faulthandler does it from a C signal handler, so it answers even when a thread
    holds the GIL and the process is frozen. False (and nothing registered) where the process has no
    stderr file to write to (an embedding that replaced it with an object in memory)."""
    for stream in (sys.stderr, sys.__stderr__):
        if stream is None:
            continue
        try:
            faulthandler.register(signum, file=stream, all_threads=True, chain=False)
        except (AttributeError, ValueError, OSError):  # no fileno (io.UnsupportedOperation is both)
            continue
        return True
    return False


def serve(
    host: str = "127.0.0.1",
    port: int = 8080,
    settings: ServiceSettings | None = None,
    sandbox: SandboxAPI | None = None,
) -> None:
    """Serve until stopped. ``sandbox``: a ``dojo.cluster.SandboxFleet`` makes this a gateway to a
    Ray cluster (started before the port is bound, closed at the end); by default the service owns
    a local sandbox."""
    settings = settings or ServiceSettings(token=os.environ.get("DOJO_TOKEN") or None)
    check_bind(host, settings.token)
    configure_json_logging()
    dump_stacks_on(signal.SIGUSR1)
    app = guarded(create_app(settings, sandbox, close_sandbox=True), settings.token, host)
    config = uvicorn.Config(app, host=host, port=port, log_config=None, access_log=False, timeout_keep_alive=75)
    if sandbox is None:
        with contextlib.suppress(KeyboardInterrupt):  # SIGINT: uvicorn shut down cleanly, then raised it again
            uvicorn.Server(config).run()
        return

    async def main(sandbox: SandboxAPI) -> None:
        try:
            await sandbox.start()  # a missing or incapable cluster fails here, before the port is bound
            await uvicorn.Server(config).serve()  # the app's shutdown closes the sandbox
        finally:
            await sandbox.close()  # again (a no-op), unless a second SIGINT made uvicorn skip the shutdown

    with (
        contextlib.suppress(KeyboardInterrupt),
        asyncio.Runner(loop_factory=config.get_loop_factory()) as runner,  # the loop uvicorn picks (uvloop)
    ):
        runner.run(main(sandbox))
