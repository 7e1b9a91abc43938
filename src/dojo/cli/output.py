"""Where the command line writes: results on stdout, progress and errors on stderr, and one way to
stop with an error that says what was wrong and how to fix it."""

from __future__ import annotations

from typing import NoReturn

import typer
from rich.console import Console

console = Console()  # results: tables, summaries
err_console = Console(stderr=True)  # progress, warnings, errors


def fail(message: str, code: int = 2) -> NoReturn:
    """Print ``error: message`` on stderr and exit with ``code`` (2: bad input, the default)."""
    err_console.print(f"[red]error:[/red] {message}", soft_wrap=True, highlight=False)
    raise typer.Exit(code)
