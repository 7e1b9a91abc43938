"""Where the command line writes: results on stdout, progress and errors on stderr, and one way to
stop with an error that says what was wrong and how to fix it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import NoReturn

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape

from dojo.errors import field_problems

console = Console()  # results: tables, summaries
err_console = Console(stderr=True)  # progress, warnings, errors


def fail(message: str, code: int = 2) -> NoReturn:
    """Print ``error: message`` on stderr and exit with ``code`` (2: bad input, the default). The
    message is text, never Rich markup: a ``[low, high]`` in it had vanished, and a user's
    ``family:[/x]`` had ended in a MarkupError traceback."""
    err_console.print(f"[red]error:[/red] {escape(message)}", soft_wrap=True, highlight=False)
    raise typer.Exit(code)


def problem(error: Exception) -> str:
    """What was wrong, for ``fail``: a pydantic ``ValidationError`` as its first field and message
    (its own text, with ``[type=value_error, input_value=...]`` and a link, had been printed whole)."""
    if isinstance(error, ValidationError):
        more = f" (and {error.error_count() - 1} more)" if error.error_count() > 1 else ""
        return field_problems(error)[0] + more
    return str(error)


def writable_file(path: Path | None, option: str) -> None:
    """Fail now, before any work, where ``path`` (a file the command writes at its end) cannot be
    written: a directory, or in a directory that does not exist (the work's result had been lost to
    a traceback after it was done)."""
    if path is None:
        return
    if path.is_dir():
        fail(f"{option} {path} is a directory; give a file path (e.g. {path / 'report.json'})")
    if not path.parent.is_dir():
        fail(f"{option} {path}: the directory {path.parent} does not exist; create it or give another path")
    if not os.access(path if path.exists() else path.parent, os.W_OK):
        fail(f"{option} {path} cannot be written here (permissions); give another path")
