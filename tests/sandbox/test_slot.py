"""Starting a slot: the zygote's code is compiled by the sandbox interpreter itself."""

from __future__ import annotations

import marshal
from pathlib import Path

import pytest

from dojo.sandbox import IsolationUnavailable
from dojo.sandbox.languages import default_python
from dojo.sandbox.slot import compiled_zygote


async def test_the_zygote_is_compiled_once_by_the_given_interpreter() -> None:
    code = await compiled_zygote(default_python())
    assert await compiled_zygote(default_python()) is code
    loaded = marshal.loads(code)
    assert loaded.co_filename.endswith("zygote.py")
    assert "main" in loaded.co_names


async def test_an_interpreter_that_cannot_compile_it_is_a_clear_error(tmp_path: Path) -> None:
    broken = tmp_path / "python3"
    broken.write_text("#!/bin/sh\necho 'SyntaxError: not this python' >&2\nexit 1\n")
    broken.chmod(0o755)
    with pytest.raises(IsolationUnavailable, match="could not compile the zygote: SyntaxError: not this python"):
        await compiled_zygote(str(broken))
    with pytest.raises(IsolationUnavailable, match="cannot start the sandbox interpreter"):
        await compiled_zygote(str(tmp_path / "missing-python"))
