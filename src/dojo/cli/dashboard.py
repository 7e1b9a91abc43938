"""``dojo dashboard``: serve the live page over runs, their sandbox services and alerts."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated

import typer

from dojo.cli.output import err_console, fail
from dojo.errors import InputError


def dashboard(
    runs: Annotated[
        list[str],
        typer.Argument(
            help="Run directories (dojo train --out) or trajectory store URLs (dojo rollout --out); NAME=PATH names "
            "one. Several are compared on one chart. A directory that does not exist yet is waited for."
        ),
    ],
    host: Annotated[str, typer.Option(help="Address to bind; non-loopback needs a token.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to bind.", min=1, max=65535)] = 8766,
    token: Annotated[str | None, typer.Option(envvar="DOJO_TOKEN", help="Token the page and the API need.")] = None,
    service: Annotated[
        list[str] | None, typer.Option(help="A sandbox service (dojo serve) to watch: its URL; repeatable.")
    ] = None,
    service_token: Annotated[
        str | None, typer.Option(envvar="DOJO_SERVICE_TOKEN", help="Bearer token of the sandbox services.")
    ] = None,
    rules: Annotated[
        Path | None, typer.Option(help="Alert rules (YAML: rules, webhook) for the defaults (docs/dashboard.md).")
    ] = None,
    webhook: Annotated[str | None, typer.Option(help="POST each alert that starts or stops here (JSON).")] = None,
    review: Annotated[
        Path | None, typer.Option(help="A judge's review set (dojo judge sample): its agreement with people.")
    ] = None,
) -> None:
    """Serve a live page of runs: curves, the slowest episodes, a trajectory viewer, sandbox nodes, alerts."""
    import uvicorn

    from dojo.dashboard import Dashboard, RunLocation, create_dashboard_app, load_rules
    from dojo.service.loopback import guarded, is_loopback
    from dojo.service.server import check_port

    if not is_loopback(host) and not token:
        fail(f"refusing to bind {host} without a token: the page shows every trajectory of the runs. Pass --token "
             "(or set DOJO_TOKEN), or bind 127.0.0.1.")  # fmt: skip
    for url in service or []:
        if not url.startswith(("http://", "https://")):
            fail(f"--service {url!r}: give the service's URL, e.g. http://127.0.0.1:8080")
    if webhook is not None and not webhook.startswith(("http://", "https://")):
        fail(f"--webhook {webhook!r}: give an http(s) URL")
    try:
        locations = [RunLocation.parse(spec) for spec in runs]
        rule_file = load_rules(rules) if rules is not None else None
    except InputError as e:
        fail(str(e))
    board = Dashboard(
        locations,
        services=service,
        service_token=service_token,
        rules=rule_file.rules if rule_file else None,
        webhook=webhook or (rule_file.webhook if rule_file else None),
        review=review,
    )
    try:  # (last of the checks, before the address is printed: a port in use is not the first thing to fix)
        check_port(host, port)
    except InputError as e:
        fail(str(e))
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    shown = "localhost" if is_loopback(host) else host
    address = f"http://{shown}:{port}/" + (f"?token={token}" if token and is_loopback(host) else "")
    err_console.print(f"dashboard of {', '.join(loc.name for loc in locations)}: open {address} (Ctrl-C to stop)",
                      soft_wrap=True, highlight=False)  # fmt: skip
    uvicorn.run(guarded(create_dashboard_app(board, token), token, host), host=host, port=port, log_level="warning")
