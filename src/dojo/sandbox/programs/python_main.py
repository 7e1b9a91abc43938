"""A strict run's Python: ``python3 -S -E -s -B -c <this program> main.py [args]`` runs ``main.py`` as
``python3 -S main.py`` would, with Python's ``exit`` and ``quit``, which ``site`` defines and the
sandbox's interpreter (``-S``: no site-packages of the system) does not: a program ending in
``exit(0)``, as SandboxFusion's users write them, had failed with a ``NameError`` (found
2026-12-06; a slot's zygote defines them for the runs it forks: ``preload.install_quitters``).

Shipped as the ``-c`` text with ``dojo.sandbox.guest.ending`` (``dojo.sandbox.bundle``), so it runs
in ``__main__`` and leaves nothing of its own there: the program finds ``sys.argv``, ``sys.path``,
``sys.modules`` and its module's attributes as a script's. An exception it does not catch is
printed by ``ending`` from the program's own frame on, as a fresh run's in a slot is
(``guest.child``); the rest of the way out is Python's own (its threads waited for, its exit
handlers, its streams flushed), and an uncaught ``KeyboardInterrupt`` ends it by SIGINT after them.
"""

from __future__ import annotations

from dojo.sandbox.guest.ending import (
    end_by_interrupt,
    ends_by_interrupt,
    exit_status,
    flush_streams,
    print_program_error,
)

# What ``__main__`` holds when Python runs a script, before its first line.
SCRIPT_GLOBALS = frozenset(
    ("__name__", "__doc__", "__package__", "__loader__", "__spec__", "__annotations__", "__builtins__", "__file__",
     "__cached__")
)  # fmt: skip


def _run_main() -> None:
    import _sitebuiltins
    import atexit
    import builtins
    import os
    import sys

    # (bound before the program runs: its names leave ``__main__``, and it may rebind builtins)
    printed, status_of, flushed, by_interrupt, end = (
        print_program_error, exit_status, flush_streams, ends_by_interrupt, end_by_interrupt
    )  # fmt: skip
    any_exception, system_exit, leave = BaseException, SystemExit, os._exit
    builtins.exit = _sitebuiltins.Quitter("exit", "Ctrl-D (i.e. EOF)")
    builtins.quit = _sitebuiltins.Quitter("quit", "Ctrl-D (i.e. EOF)")
    interrupted: list[bool] = []

    def last_exit_handler() -> None:  # (registered first: it runs after the program's own)
        if interrupted:
            flushed()
            leave(end())  # (130 where the program blocked SIGINT, as Python's status is)

    atexit.register(last_exit_handler)
    del sys.argv[0]  # ("-c", "main.py", *args): as a script's
    path = os.path.abspath(sys.argv[0])
    sys.path.insert(0, os.path.dirname(path))  # (the bundle's preamble left only what the run cannot write)
    main = sys.modules["__main__"]
    for name in [name for name in main.__dict__ if name not in SCRIPT_GLOBALS]:
        del main.__dict__[name]
    for name in [name for name in sys.modules if name == "dojo" or name.startswith("dojo.")]:
        del sys.modules[name]
    main.__doc__ = None
    main.__annotations__ = {}
    main.__file__ = path
    main.__cached__ = None  # type: ignore[attr-defined]
    main.__loader__ = sys.modules["_frozen_importlib_external"].SourceFileLoader("__main__", path)
    uncaught: BaseException | None = None
    try:
        with open(path, "rb") as f:
            code = compile(f.read(), path, "exec", dont_inherit=True)
        exec(code, main.__dict__)
    except system_exit:
        raise  # (Python's own way out)
    except any_exception as e:
        uncaught = e
    if uncaught is None:
        return
    hook_exit = printed(uncaught)  # (outside the handler, as Python prints it; from the frame after this one)
    if hook_exit is None and by_interrupt(uncaught):
        interrupted.append(True)
    raise system_exit(1 if hook_exit is None else status_of(hook_exit))


_run_main()
