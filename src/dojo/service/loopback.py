"""Servers on loopback without a token answer only requests addressed to loopback.

A server bound to 127.0.0.1 is out of other machines' reach, but not out of a web page's: a page
the operator opens elsewhere can point its own domain's DNS at 127.0.0.1 (DNS rebinding), and the
browser then sends it, as same-origin, every answer of the local server, whose requests name the
page's domain in their ``Host`` header. Every ``dojo`` server without a token (``dojo serve``, the
dashboard, the policy server, the labelling page) is wrapped in ``LoopbackHostsOnly`` by the command
that starts it: any other ``Host`` is a 400 that says why and how to serve other names (a token).
Measured before: a dashboard on 127.0.0.1 answered ``Host: attacker.example`` with every
trajectory (/root/scratch/adv10/auth_probe.py, 2026-12-06).
"""

from __future__ import annotations

import ipaddress

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

LOOPBACK_NAMES = ("localhost", "localhost.")  # (not names under .localhost: a resolver may send them to DNS)


def is_loopback(host: str) -> bool:
    """Whether ``host`` is ``localhost`` or a loopback address literal (IPv6 with or without brackets)."""
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.removeprefix("[").removesuffix("]")).is_loopback
    except ValueError:
        return False


def host_of(header: str) -> str | None:
    """The name or address of a ``Host`` header without its port; None where the header is not one."""
    if header.startswith("["):  # [::1]:8080
        end = header.find("]")
        rest = header[end + 1 :]
        if end < 0 or (rest and not (rest[:1] == ":" and rest[1:].isdigit())):
            return None
        return header[1:end]
    name, colon, port = header.partition(":")
    return None if colon and not port.isdigit() else name


class LoopbackHostsOnly:
    """ASGI middleware: a request whose ``Host`` is not a loopback name or address gets a 400."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        raw = dict(scope.get("headers", [])).get(b"host", b"").decode("latin-1")
        host = host_of(raw)
        if host is not None and is_loopback(host):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        error = (
            f"this server has no token, so it answers only requests addressed to localhost or 127.0.0.1, not "
            f"{raw or 'no Host'!r} (a web page elsewhere could otherwise read it through DNS rebinding): open it "
            "as http://127.0.0.1:PORT/, or start it with a token to serve other names"
        )
        await JSONResponse({"error": error}, status_code=400)(scope, receive, send)


def guarded(app: ASGIApp, token: str | None, host: str) -> ASGIApp:
    """``app`` as a command serves it on ``host``: wrapped in ``LoopbackHostsOnly`` when it has no
    token and binds loopback (a server bound elsewhere without one, as the policy server may be, is
    open to whoever reaches it, and its command says so)."""
    return LoopbackHostsOnly(app) if not token and is_loopback(host) else app
