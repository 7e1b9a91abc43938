"""A strict run's Python: ``python3 -S -E -s -B -c <this program> main.py [args]`` runs ``main.py`` as
``python3 -S main.py`` would, with Python's ``exit`` and ``quit``, which ``site`` defines and the
sandbox's interpreter (``-S``: no site-packages of the system) does not: a program ending in
``exit(0)``, as SandboxFusion's users write them, had failed with a ``NameError`` (found
2026-12-06; a slot's zygote defines them for the runs it forks: ``ending.install_quitters``).

Shipped as the ``-c`` text with ``dojo.sandbox.guest.ending`` (``dojo.sandbox.bundle``), so it runs
in ``__main__`` and leaves nothing of its own there: the program finds ``sys.argv``, ``sys.path``,
``sys.modules`` and its module's attributes as a script's. An exception it does not catch is
printed by ``ending`` from the program's own frame on, as a fresh run's in a slot is
(``guest.child``); the rest of the way out is Python's own (its threads waited for, its exit
handlers, its files flushed, an uncaught ``KeyboardInterrupt`` ending it by SIGINT after all that;
the objects the program's frame held stay alive, so their ``__del__`` may not run).

No ``from __future__`` import here: it would run before the bundle's preamble takes the run's own
directory off ``sys.path``, and import a ``/box/__future__.py`` given with the program (in a grading
harness's trusted process too). The preamble's shared module imports the standard library's first.
"""

from dojo.sandbox.guest.ending import exit_status, flush_streams, install_quitters, print_program_error

# What ``__main__`` holds when Python runs a script, before its first line.
SCRIPT_GLOBALS = frozenset(
    ("__name__", "__doc__", "__package__", "__loader__", "__spec__", "__annotations__", "__builtins__", "__file__",
     "__cached__")
)  # fmt: skip


def _run_main() -> None:
    import os
    import sys  # (a local name: the module's names leave __main__ before the program runs)

    # (bound before the program runs: its names leave ``__main__``, and it may rebind builtins)
    printed, status_of, flushed, any_exception, system_exit, interrupt, kind_of = (
        print_program_error, exit_status, flush_streams, BaseException, SystemExit, KeyboardInterrupt, type
    )  # fmt: skip
    install_quitters()
    del sys.argv[0]  # ("-c", "main.py", *args): as a script's
    path = os.path.abspath(sys.argv[0])
    # A script's path: its directory, then PYTHONPATH's entries (where the run reads its environment),
    # then what the bundle's preamble kept (it had dropped the entries the run can write, /box/lib too).
    given = os.environ.get("PYTHONPATH", "") if not sys.flags.ignore_environment else ""
    entries = [os.path.abspath(p) for p in given.split(os.pathsep) if p]
    sys.path[:] = [os.path.dirname(path), *entries, *(p for p in sys.path if p not in entries)]
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
        flushed()  # (as Python's ``flush_io`` after a script's code, whatever way it ended: its output
        raise  # before what its threads and exit handlers print); Python's own way out
    except any_exception as e:
        uncaught = e
    flushed()
    if uncaught is None:  # (leaving here, not by the bundle's lines after this module: they would
        raise system_exit(None)  # import with the builtins the program left, __import__ rebound too)
    hook_exit = printed(uncaught)  # (outside the handler, as Python prints it; from the frame after this one)
    if hook_exit is not None:
        raise system_exit(status_of(hook_exit))
    if kind_of(uncaught) is interrupt:  # Python's way out, printed already: SIGINT once all is finalised
        sys.excepthook = lambda *_: None
        raise uncaught
    raise system_exit(1)


_run_main()
