"""Starting a slot: the zygote's code (the guest modules) is compiled by the sandbox interpreter
itself and shipped in import order."""

from __future__ import annotations

import ast
import marshal
from pathlib import Path

import pytest

from dojo.sandbox import IsolationUnavailable
from dojo.sandbox.languages import default_python
from dojo.sandbox.slot import GUEST, GUEST_MODULES, compiled_zygote


async def test_the_zygote_is_compiled_once_by_the_given_interpreter() -> None:
    code = await compiled_zygote(default_python())
    assert await compiled_zygote(default_python()) is code
    loaded = marshal.loads(code)
    assert [name for name, _, _ in loaded] == [f"dojo.sandbox.guest.{name}" for name in GUEST_MODULES]
    _, filename, zygote = loaded[-1]
    assert filename == zygote.co_filename and zygote.co_filename.endswith("dojo/sandbox/guest/zygote.py")
    assert "main" in zygote.co_names


def test_the_bundle_holds_every_guest_module_after_those_it_imports() -> None:
    """The bootstrap runs the modules in ``GUEST_MODULES``' order with nothing to import them from: a
    module must come after every guest module it imports, and import them at its top level only (the
    zygote takes them out of ``sys.modules`` before its first run: ``guest.zygote.main``)."""
    on_disk = {path.stem for path in GUEST.glob("*.py")} - {"__init__"}
    assert set(GUEST_MODULES) == on_disk
    for index, name in enumerate(GUEST_MODULES):
        tree = ast.parse((GUEST / f"{name}.py").read_text())
        top_level = {id(node) for node in tree.body}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                assert not any(alias.name.startswith("dojo") for alias in node.names), (name, node.lineno)
            if not isinstance(node, ast.ImportFrom) or not (node.module or "").startswith("dojo"):
                continue
            if id(node) not in top_level:  # only the type checker's: ``if TYPE_CHECKING:``
                guarded = [n for n in tree.body if isinstance(n, ast.If) and node in n.body]
                assert guarded and ast.unparse(guarded[0].test) == "TYPE_CHECKING", (name, node.lineno)
                continue
            assert node.module is not None and node.module.startswith("dojo.sandbox.guest."), (name, node.module)
            imported = node.module.rpartition(".")[2]
            assert imported in GUEST_MODULES[:index], f"{name} imports {imported}, which the bundle ships later"


async def test_an_interpreter_that_cannot_compile_it_is_a_clear_error(tmp_path: Path) -> None:
    broken = tmp_path / "python3"
    broken.write_text("#!/bin/sh\necho 'SyntaxError: not this python' >&2\nexit 1\n")
    broken.chmod(0o755)
    with pytest.raises(IsolationUnavailable, match="could not compile the zygote: SyntaxError: not this python"):
        await compiled_zygote(str(broken))
    with pytest.raises(IsolationUnavailable, match="cannot start the sandbox interpreter"):
        await compiled_zygote(str(tmp_path / "missing-python"))
