"""A program's input is checked before it reaches a slot: what a run could not lay out is the
input's error (the caller's, shown to an agent as its call's error), never the sandbox's failure."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from dojo.sandbox import AsyncSandbox, InputFile, Program, Verdict


def test_paths_a_run_could_not_lay_out_are_input_errors() -> None:
    # each failed the run as a sandbox error (no reward for the episode that wrote it)
    for bad in ("é" * 200, "d/" + "é" * 128, "x\udc80y"):
        with pytest.raises(ValidationError, match=r"longer than 255 bytes|not valid UTF-8"):
            InputFile(path=bad, content=b"")
    with pytest.raises(ValidationError, match="cannot be a file and a directory"):
        Program(
            language="python", source="", files=[InputFile(path="a", content=b""), InputFile(path="a/b", content=b"")]
        )
    Program(
        language="python", source="", files=[InputFile(path="a/b", content=b""), InputFile(path="a/c", content=b"")]
    )


async def test_a_name_of_255_bytes_is_laid_out(fast_sandbox: AsyncSandbox) -> None:
    name = "é" * 127 + "x"  # 255 bytes: the longest name the file system takes
    program = Program(
        language="python",
        source=f"print(open({name!r}).read())",
        files=[InputFile(path=f"d/{name}", content=b"hello"), InputFile(path=name, content=b"hello")],
    )
    result = await fast_sandbox.run(program)
    assert result.verdict is Verdict.ACCEPTED and result.stdout.strip() == "hello", result


async def test_a_file_under_the_source_file_is_the_inputs_error(fast_sandbox: AsyncSandbox) -> None:
    """``main.py/x`` (a directory where the program's own file is) failed as the sandbox's error."""
    from dojo.errors import InputError

    program = Program(language="python", source="print(1)", files=[InputFile(path="main.py/x", content=b"")])
    with pytest.raises(InputError, match=r"'main\.py' cannot be a file and a directory"):
        await fast_sandbox.run(program)
    assert (await fast_sandbox.run(Program(language="python", source="print(1)"))).verdict is Verdict.ACCEPTED
