"""`dojo serve`: run the service with uvicorn, refusing unsafe bind configurations."""

from __future__ import annotations

import asyncio
import ipaddress
import os

import uvicorn

from dojo.errors import InputError
from dojo.sandbox import SandboxAPI
from dojo.service.app import ServiceSettings, create_app
from dojo.service.logs import configure_json_logging


class UnsafeBind(InputError):
    """A non-loopback bind without a token."""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None) -> None:
    if not is_loopback(host) and not token:
        raise UnsafeBind(
            f"refusing to bind {host} without a token: anyone who can reach it could run code on this machine. "
            "Pass --token (or set DOJO_TOKEN), or bind 127.0.0.1."
        )


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
    app = create_app(settings, sandbox)
    config = uvicorn.Config(app, host=host, port=port, log_config=None, access_log=False, timeout_keep_alive=75)
    if sandbox is None:
        uvicorn.Server(config).run()
        return

    async def main(sandbox: SandboxAPI) -> None:
        await sandbox.start()  # a missing or incapable cluster fails here, before the port is bound
        try:
            await uvicorn.Server(config).serve()
        finally:
            await sandbox.close()

    asyncio.run(main(sandbox))
