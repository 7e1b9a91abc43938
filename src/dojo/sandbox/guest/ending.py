"""How a program's own process ends, as ``python3 main.py`` ends: the traceback of an exception it
did not catch, then its standard streams flushed.

Runs inside the sandbox, in the program's own process: a run's (``guest.child``), a session cell's
(``guest.sessions``), and a graded solution's and its judge's (``dojo.rewards.programs.harness``,
which carries this module with it). Standard library only.

The traceback's printer is the interpreter's own (``sys.__excepthook__``, C): the ``traceback``
module prints the same text, but in Python, and in 3.11 its carets import ``ast`` first (a run that
raised cost 5.25 ms of machine CPU against 2.20 this way, ``bench/failures.py``). A
``sys.excepthook`` the program installs is called as Python calls it, and an uncaught
``KeyboardInterrupt`` ends the process by SIGINT, as it ends ``python3``.
"""

from __future__ import annotations

import _io
import _signal  # type: ignore[import-not-found]  # (signal.signal without its enum wrapping)
import _thread
import _weakref
import os
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
_SYSTEM_EXIT = SystemExit
_KEYBOARD_INTERRUPT = KeyboardInterrupt
_SET_SIGNAL, _SIGINT, _SIG_DFL = _signal.signal, int(_signal.SIGINT), int(_signal.SIG_DFL)
_KILL, _GETPID, _DUP, _CLOSE = os.kill, os.getpid, os.dup, os.close
_THREADS = _thread._count  # the threads this process runs besides its first
_WEAK_REFERENCE, _MODULE = _weakref.ref, type(sys)
_MISSING = object()
# The most blocks of its own (past its zygote's, ``note_zygote_blocks``) a program may hold for
# ``flush_open_files`` to look through its objects: a list of them costs 8 bytes each (~2 MiB).
SCAN_BLOCKS_MAX = 250_000
_zygote_blocks = 0
_STANDARD: list[Any] = []  # the standard streams a run's process started with (``note_standard_streams``)
_STANDARD_BUFFERS: list[Any] = []  # and their buffers, in the same order
# The file objects that may hold what a program wrote and not yet its file (``flush_open_files``).
_TEXT_WRITER = _io.TextIOWrapper
_WRITERS = frozenset((_io.TextIOWrapper, _io.BufferedWriter, _io.BufferedRandom, _io.BufferedRWPair))


def install_quitters() -> None:
    """Python's ``exit`` and ``quit``, which ``site`` defines and the sandbox's ``python3 -S`` does
    not: a program ending in ``exit(0)`` (SandboxFusion's runs have them) had failed with a
    ``NameError`` (found 2026-12-06). A slot's zygote installs them for the runs it forks
    (``guest.preload``), a strict run's interpreter for its own (``dojo.sandbox.programs.python_main``)."""
    import _sitebuiltins
    import builtins

    builtins.exit = _sitebuiltins.Quitter("exit", "Ctrl-D (i.e. EOF)")
    builtins.quit = _sitebuiltins.Quitter("quit", "Ctrl-D (i.e. EOF)")


def print_program_error(e: BaseException) -> SystemExit | None:
    """``e``'s traceback on ``sys.stderr`` from the program's own frame on: the first frame (the one
    that ran the program's code) is left out. As Python's exit path does (``pythonrun.c``,
    ``_PyErr_PrintEx``), ``sys.last_*`` are set and ``sys.excepthook`` prints it: the printer itself
    unless the program installed another (if that one raises, both are printed; if it is missing,
    Python's words say so). What cannot be printed (a ``sys.stderr`` the program broke, an exception
    it made unprintable) is left out; nothing is raised. Returns the ``SystemExit`` a program's hook
    raised (the process then ends with its status, as Python's does), else None."""
    try:
        tb = _TRACEBACK(e)
        tb = tb.tb_next if tb is not None else None
        _SET_TRACEBACK(e, tb)  # (the printer prints the exception's own traceback)
        sys.last_type, sys.last_value, sys.last_traceback = _TYPE(e), e, tb
        hook = sys.__dict__.get("excepthook", _MISSING)
        if hook is _MISSING:
            _write_stderr("sys.excepthook is missing\n")
            hook = _PRINT_EXCEPTION
        try:
            hook(_TYPE(e), e, tb)
        except _SYSTEM_EXIT as exit_request:
            return exit_request
        except _ANY_EXCEPTION as hook_error:
            hook_tb = _TRACEBACK(hook_error)
            hook_tb = hook_tb.tb_next if hook_tb is not None else None  # (from the hook's frame on)
            _SET_TRACEBACK(hook_error, hook_tb)
            _write_stderr("Error in sys.excepthook:\n")
            _PRINT_EXCEPTION(_TYPE(hook_error), hook_error, hook_tb)
            _write_stderr("\nOriginal exception was:\n")
            _PRINT_EXCEPTION(_TYPE(e), e, tb)
    except _ANY_EXCEPTION:
        pass
    return None


def _write_stderr(text: str) -> None:
    """``text`` on ``sys.stderr`` where it can be written (``PySys_WriteStderr``: errors ignored)."""
    try:
        stream = sys.__dict__.get("stderr")
        if stream is not None:
            stream.write(text)
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


def note_standard_streams(streams: tuple[Any, ...]) -> None:
    """Note the standard streams a run's process starts with, which ``flush_streams`` flushes too
    where the program rebound ``sys.stdout`` (Python's finalisation deallocates the first ones, which
    flushes them: ``print(x); sys.stdout = open(os.devnull, "w")`` prints ``x``; a fast run had
    lost it, found 2026-12-06)."""
    _STANDARD[:] = streams
    _STANDARD_BUFFERS[:] = [getattr(stream, "buffer", None) for stream in streams]


def flush_streams(standard: bool = True, report: bool = False) -> bool:
    """``sys.stdout`` and ``sys.stderr`` flushed, as Python flushes them at exit, then (``standard``)
    the standard streams the process started with (``note_standard_streams``); False where a flush
    of the first two failed (Python then exits 120). A stream the program deleted, set to None or
    closed is left alone, as Python leaves it (a ``closed`` that cannot be read counts as open).
    ``report``: as Python's exit, print why ``sys.stdout`` could not be flushed (its flush after the
    script's code is silent)."""
    out, err = sys.__dict__.get("stdout"), sys.__dict__.get("stderr")
    out_flushed, err_flushed = _flush(out, report), _flush(err)
    if standard:
        for stream, buffer in zip(_STANDARD, _STANDARD_BUFFERS, strict=True):
            if stream is out:
                done = out_flushed
            elif stream is err:
                done = err_flushed
            else:
                done = _flush(stream)
            if not done:  # (detached from its buffer, ``sys.stdout.detach()``: what the program wrote to
                _flush(buffer)  # that buffer, which Python's exit flushes as it deallocates it; found 2026-12-07)
    return out_flushed and err_flushed


def _flush(stream: Any, report: bool = False) -> bool:
    """``stream`` flushed unless it is None or closed; False where the flush failed, and (``report``)
    the error printed as Python's exit prints it for ``sys.stdout`` (``_print_unraisable``)."""
    if stream is None:
        return True
    try:
        if stream.closed:
            return True
    except _ANY_EXCEPTION:
        pass
    try:
        stream.flush()
    except _ANY_EXCEPTION as e:
        if report:
            _print_unraisable(stream, e)
        return False
    return True


def _print_unraisable(obj: Any, e: BaseException) -> None:
    """An error Python cannot raise (``PyErr_WriteUnraisable``) reported as it reports one: to the
    program's ``sys.unraisablehook``, or as its default hook prints it, ``Exception ignored in:
    <obj>`` and the error on ``sys.stderr``, from the frame after this module's. A fast run's exit
    had printed nothing where flushing ``sys.stdout`` failed (a detached one, a writer without
    ``flush``; found 2026-12-07). (The ``traceback`` module, on this rare path only.)"""
    try:
        tb = _TRACEBACK(e)
        tb = tb.tb_next if tb is not None else None
        hook = sys.__dict__.get("unraisablehook")
        if hook is not None and hook is not sys.__unraisablehook__:
            import types

            hook(types.SimpleNamespace(exc_type=_TYPE(e), exc_value=e, exc_traceback=tb, err_msg=None, object=obj))
            return
        import traceback

        stream = sys.__dict__.get("stderr")
        if stream is None:
            return
        stream.write(f"Exception ignored in: {obj!r}\n" + "".join(traceback.format_exception(_TYPE(e), e, tb)))
        stream.flush()
    except _ANY_EXCEPTION:
        pass


def flush_open_files() -> None:
    """The program's files still open for writing, flushed, as Python's exit flushes them (its
    finalisation deallocates each, which flushes it): a run forked from a zygote ends with
    ``os._exit``, and ``f = open('answer.json', 'w'); f.write(...)`` without ``close()`` had left an
    empty file (a right answer read as none; found 2026-12-06). Text wrappers first (each flushes
    into its buffer), then buffers; the standard streams are ``flush_streams``'s.

    What it covers is the common case, not all of Python's exit: its callers look only where the
    first descriptor a file gets is in use (``files_left_open``: looking through the objects on
    every run cost a ``print(1)`` run ~47 page faults), and only where the program holds fewer than
    ``SCAN_BLOCKS_MAX`` blocks of its own: the list of its objects is memory of its own, and a run
    within it of its memory limit that had finished within it would otherwise end past it (found by
    review). The blocks its zygote held are not the program's (``note_zygote_blocks``): counted with
    them, a ``dojo-data`` run (pandas imported, ~290,000 blocks before the program's first) had
    never been flushed (found 2026-12-06). Not while a thread of the program's still runs (a daemon
    thread blocked in a write holds its writer's lock: the run had ended past its wall limit). Files
    written through a writer over a standard descriptor, a frozen object or a subclass of the io
    classes are not flushed."""
    import gc

    if sys.getallocatedblocks() - _zygote_blocks > SCAN_BLOCKS_MAX or _THREADS():
        return  # (a daemon thread still running may hold a writer's lock, blocked: its flush would wait
        # past the run's wall limit, where Python's exit never deallocates what that thread holds)

    standard: set[int] = set()
    try:
        for name in ("stdout", "stderr", "__stdout__", "__stderr__"):
            stream = sys.__dict__.get(name)
            standard.update((id(stream), id(getattr(stream, "buffer", None))))
    except _ANY_EXCEPTION:
        pass
    try:
        found = [o for o in gc.get_objects() if _TYPE(o) in _WRITERS and id(o) not in standard]
    except _ANY_EXCEPTION:
        return
    _flush_writers(found)


def _flush_writers(found: list[Any]) -> None:
    """Flush each of ``found`` that is open: text first (it writes into its buffer), then all again
    (a buffer flushed before a wrapper over it wrote into it)."""
    found.sort(key=lambda o: _TYPE(o) is not _TEXT_WRITER)
    for writer in found + found:
        try:
            if not writer.closed:
                writer.flush()
        except _ANY_EXCEPTION:
            pass


def note_zygote_blocks() -> None:
    """Note the blocks this process holds as its zygote's, whose forked runs' programs hold only
    what they make past it (``flush_open_files``). Called once a slot's zygote has preloaded."""
    global _zygote_blocks
    _zygote_blocks = sys.getallocatedblocks()


def finalize_main() -> None:
    """What Python's finalisation does to a script's objects (``finalize_modules``), for a run's
    process that then ends with ``os._exit``: ``sys.stdout`` & co. back to ``sys.__stdout__``'s,
    ``sys.last_*`` deleted, ``__main__`` out of ``sys.modules`` and a collection, so that the
    program's objects go with its globals still whole; then, where the module outlived that, its
    globals cleared in ``_PyModule_ClearDict``'s order (one leading underscore first, then all but
    ``__builtins__``). So ``__del__`` runs, a ``gzip``, ``zipfile`` or ``bz2`` file left open is
    closed whole, a file left open is flushed however many objects the program holds, a suspended
    generator's ``finally`` runs (found 2026-12-06: all were lost). The caller holds no reference
    to ``__main__``. Not where a thread of the program's still runs (Python's stops them first; here
    one would see its globals go), nor other modules' globals (``flush_open_files``); the builtins
    are the program's (Python's are back to what they were before ``open`` was set: a ``__del__``
    that calls ``open`` fails under python3 and works here)."""
    import gc

    try:
        if _THREADS():
            return
        for name in ("stdin", "stdout", "stderr"):
            sys.__dict__[name] = sys.__dict__.get(f"__{name}__")
        for name in ("last_type", "last_value", "last_traceback"):
            sys.__dict__.pop(name, None)
        # What the program's writers hold, written first: a collection finalises what it frees in the
        # order it was made, a file before the writers over it (its descriptor closed, their data
        # lost), wherever the globals are in a cycle (any program with a ``def``; found 2026-12-07)
        main = sys.modules.get("__main__")
        if _TYPE(main) is _MODULE:  # (those in its globals, however many objects it holds; then any)
            _flush_writers([v for v in main.__dict__.values() if _TYPE(v) in _WRITERS])
        flush_open_files()
        sys.modules["__main__"] = None  # type: ignore[assignment]
        alive = _WEAK_REFERENCE(main) if _TYPE(main) is _MODULE else None
        del main
        gc.collect()
        main = alive() if alive is not None else None
        if main is None:
            return
        globals_ = main.__dict__
        del main
        for key in [k for k in globals_ if _TYPE(k) is str and k[:1] == "_" and k[1:2] != "_"]:
            globals_[key] = None
        for key in [k for k in globals_ if _TYPE(k) is str and k != "__builtins__"]:
            globals_[key] = None
    except _ANY_EXCEPTION:
        pass


def files_left_open(own: int = 0) -> bool:
    """Whether a program may have left a file open: the first descriptor past the standard three
    and the caller's ``own``, the one a file gets first, is in use (or the probe failed): two system
    calls. A file left open after the first one opened was closed is missed, and so is a writer over
    a standard descriptor. Looking further cost every ``print(1)`` run more than it is worth
    (2026-12-06): a listing of ``/proc/self/fd`` ~8% of its CPU (``bench/run_cost.py ab``), a
    ``poll`` of 60 descriptors 10-20 page faults, a second probe ~10 (``faults``); and (2026-12-07)
    an audit hook noting every file opened to write, ~3 page faults but a Python call for every
    audited event of the program's (``id()`` ~3.5x slower, ``copy.deepcopy`` +15-35%, and one level
    of recursion less where an audited call is made at the deepest), so tried and not kept."""
    try:
        probe = _DUP(2)
        _CLOSE(probe)
        return probe != 3 + own
    except _ANY_EXCEPTION:
        return True


def exit_status(e: SystemExit) -> int:
    """The status a process ends with for ``SystemExit`` ``e``, as Python's: None 0, an int its low
    byte, anything else printed on stderr and 1."""
    code = e.code
    if code is None:
        return 0
    if isinstance(code, int):  # (past a C long, Python's conversion fails: -1, so 255; found 2026-12-07)
        return code & 0xFF if -(1 << 63) <= code < 1 << 63 else 255
    try:
        stream = sys.__dict__.get("stderr")
        if stream is None:  # (Python's C stderr then, descriptor 2: ``print`` would write on stdout)
            os.write(2, f"{code}\n".encode(errors="backslashreplace"))
        else:
            print(code, file=stream)
    except _ANY_EXCEPTION:
        pass
    return 1


def ends_by_interrupt(e: BaseException | None) -> bool:
    """Whether Python ends a program whose uncaught exception was ``e`` by SIGINT, as Ctrl-C would
    have ended it (``Py_RunMain``: exactly ``KeyboardInterrupt``, not a subclass; a program's hook
    that raised ``SystemExit`` ends it with that status instead, see ``print_program_error``)."""
    return e is not None and _TYPE(e) is _KEYBOARD_INTERRUPT


def end_by_interrupt() -> int:
    """This process ended by SIGINT, its default action restored, as Python ends after an uncaught
    ``KeyboardInterrupt`` once its streams are flushed (``exit_sigint``); returns 130 (128 + SIGINT),
    Python's status where the signal did not end it (the program blocked SIGINT)."""
    try:
        _SET_SIGNAL(_SIGINT, _SIG_DFL)
        _KILL(_GETPID(), _SIGINT)
    except _ANY_EXCEPTION:
        pass
    return 128 + _SIGINT
