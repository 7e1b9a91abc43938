"""How a program's own process ends, as ``python3 main.py`` ends: the traceback of an exception it
did not catch, then its standard streams flushed.

Runs inside the sandbox, in the program's own process: a run's (``guest.child``), a session cell's
(``guest.sessions``), and a graded solution's and its judge's (``dojo.rewards.programs.harness``,
which carries this module with it). Standard library only.

The traceback's printer is the interpreter's own (``sys.__excepthook__``, C): the ``traceback``
module prints the same text, but in Python, and in 3.11 its carets import ``ast`` first (a run that
raised cost 5.25 ms of machine CPU against 2.20 this way, ``bench/failures.py``). One difference
from ``python3 main.py`` remains: a ``sys.excepthook`` the program installs is not called.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from io import StringIO
from types import TracebackType
from typing import Any

# Bound when this module loads (the zygote; the harness's top level), before any program runs: a
# program may rebind or delete ``sys.__excepthook__`` or names of ``builtins``, and its exception's
# class may override ``__getattribute__`` and ``__setattr__``; Python's own exit path minds none.
_PRINT_EXCEPTION: Callable[[type[BaseException], BaseException, TracebackType | None], Any] = sys.__excepthook__
_TRACEBACK: Callable[[BaseException], TracebackType | None] = BaseException.__dict__["__traceback__"].__get__
_SET_TRACEBACK = BaseException.with_traceback
_TYPE = type
_ANY_EXCEPTION = BaseException
_MISSING = object()


def print_program_error(e: BaseException) -> None:
    """``e``'s traceback on ``sys.stderr`` from the program's own frame on: the first frame (the one
    that ran the program's code) is left out. What cannot be printed (a ``sys.stderr`` the program
    broke, an exception it made unprintable) is left out; nothing is raised."""
    try:
        tb = _TRACEBACK(e)
        tb = tb.tb_next if tb is not None else None
        _SET_TRACEBACK(e, tb)  # (the printer prints the exception's own traceback)
        _PRINT_EXCEPTION(_TYPE(e), e, tb)
    except _ANY_EXCEPTION:
        pass


def program_error_text(e: BaseException) -> str:
    """What ``print_program_error`` prints, as text ("" where nothing could be printed)."""
    saved = sys.__dict__.get("stderr", _MISSING)
    try:
        out = StringIO()
        sys.stderr = out
        print_program_error(e)
        return out.getvalue()
    except _ANY_EXCEPTION:
        return ""
    finally:
        if saved is _MISSING:
            sys.__dict__.pop("stderr", None)
        else:
            sys.stderr = saved


def flush_streams() -> bool:
    """``sys.stdout`` and ``sys.stderr`` flushed, as Python flushes them at exit; False where a flush
    failed (Python then exits 120). A stream the program deleted, set to None or closed is left
    alone, as Python leaves it (a ``closed`` that cannot be read counts as open)."""
    flushed = True
    for name in ("stdout", "stderr"):
        stream = sys.__dict__.get(name)
        if stream is None:
            continue
        try:
            if stream.closed:
                continue
        except _ANY_EXCEPTION:
            pass
        try:
            stream.flush()
        except _ANY_EXCEPTION:
            flushed = False
    return flushed
