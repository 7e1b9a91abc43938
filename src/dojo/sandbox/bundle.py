"""A program that runs in the sandbox, shipped from its module's file with the shared modules it
imports (``dojo.tasks.values``, ``dojo.sandbox.guest.wire``: written once, for the host and the
sandbox; ``dojo.sandbox.guest.ending``: written once, for the zygote's runs and the program).

``program_source(main, shared)`` is the main module's text with a few lines spliced in after its
docstring and ``__future__`` imports: they install each shared module into ``sys.modules`` under
its real dotted name, from its source text compiled with its real file name, before the main
module's own imports run. So a program imports a shared module as ``from dojo.tasks.values import
encode_value`` (only that form: a plain ``import dojo.tasks.values`` would need the parent packages,
which are not there), the same line type-checked on the host; and nothing of it is looked up on
``sys.path``, where a run's candidate could have written a module of the same name. A few lines
appended take them out of ``sys.modules`` again once the program's top level has run: the zygote
runs a preloaded program's top level (the grading harness), and a run forked from it afterwards
must find ``sys.modules`` without ``dojo`` (``dojo.sandbox.guest.zygote``). So a program imports
its shared modules at its top level, never later.

A program run as a fresh interpreter's main module (strict isolation) has the run's own directory,
``/box``, first on ``sys.path``, and the files a run is given are there before it starts: before
anything else, the preamble keeps only the absolute entries the run cannot write, so that neither a
shared module's imports nor the program's own find a module the run put there (a ``/box/json.py``
given with a program whose function the harness calls ran in its trusted process before this: test).
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path
from types import ModuleType

# What the program runs first: the shared modules, each from the text the host read from its file.
PREAMBLE = """import sys as _dojo_sys

if __name__ == "__main__":  # a fresh interpreter: no import from where the run writes (/box first)
    _dojo_sys.path[:] = [p for p in _dojo_sys.path if p.startswith("/") and not __import__("os").access(p, 2)]
for _dojo_name, _dojo_file, _dojo_text in {modules}:  # the program's shared modules (dojo.sandbox.bundle)
    _dojo_module = type(_dojo_sys)(_dojo_name)
    _dojo_module.__file__ = _dojo_file
    _dojo_sys.modules[_dojo_name] = _dojo_module
    exec(compile(_dojo_text, _dojo_file, "exec", dont_inherit=True), _dojo_module.__dict__)
del _dojo_sys, _dojo_name, _dojo_file, _dojo_text, _dojo_module
"""
# What it runs last: the shared modules leave ``sys.modules`` (the program's names hold them).
EPILOGUE = """
import sys as _dojo_sys  # (dojo.sandbox.bundle) a run forked after a preload finds no dojo module

for _dojo_name in {names}:
    _dojo_sys.modules.pop(_dojo_name, None)
del _dojo_sys, _dojo_name
"""


def _head_lines(tree: ast.Module) -> int:
    """How many lines the module's docstring and ``__future__`` imports take: what must stay first."""
    end = 0
    for index, node in enumerate(tree.body):
        docstring = index == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        future = isinstance(node, ast.ImportFrom) and node.module == "__future__"
        if not (docstring or future):
            break
        end = node.end_lineno or node.lineno
    return end


@functools.cache
def program_source(main: Path, shared: tuple[ModuleType, ...] = ()) -> str:
    """The source of the program whose main module is the file ``main``, carrying the ``shared``
    modules it imports (read once per process: the text is the same for every run)."""
    if not main.is_file():
        raise ValueError(f"no sandbox program {main.stem!r} in {main.parent}")
    text = main.read_text()
    if not shared:
        return text
    modules = tuple((m.__name__, m.__file__, Path(str(m.__file__)).read_text()) for m in shared)
    lines = text.splitlines(keepends=True)
    head = _head_lines(ast.parse(text))
    names = repr(tuple(m.__name__ for m in shared))
    body = "".join(lines[head:])
    return "".join(lines[:head]) + "\n" + PREAMBLE.format(modules=repr(modules)) + body + EPILOGUE.format(names=names)
