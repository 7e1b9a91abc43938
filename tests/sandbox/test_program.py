"""A program's input is checked before it reaches a slot: what a run could not lay out is the
input's error (the caller's, shown to an agent as its call's error), never the sandbox's failure."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from dojo.sandbox import AsyncSandbox, InputFile, Program, Verdict


def test_paths_a_run_could_not_lay_out_are_input_errors() -> None:
    # each failed the run as a sandbox error (no reward for the episode that wrote it)
    for bad in ("é" * 200, "d/" + "é" * 128, "x\udc80y"):
        with pytest.raises(ValidationError, match=r"longer than 255 bytes|lone surrogate"):
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


def test_text_that_cannot_be_encoded_is_the_inputs_error() -> None:
    # a lone surrogate (JSON's "\ud800") in the source or stdin was a 500 from the service, and in
    # the environment a SandboxError verdict, which the client retried
    lone = "\ud800"
    for field, value in (("source", f"print(1){lone}"), ("stdin", lone), ("args", [lone]), ("env", {"A": lone}),
                         ("fetch", [f"/tmp/{lone}"]), ("hidden", [f"/usr/{lone}"])):  # fmt: skip
        with pytest.raises(ValidationError, match="lone surrogate") as caught:
            Program.model_validate({"language": "python", "source": "", field: value})
        assert caught.value.errors()[0]["loc"] == (field,)
    Program(language="python", source="", stdin="\udc80", args=["\udcff"])  # raw bytes, as os.fsencode writes them


def test_more_input_files_than_a_work_dir_holds_is_the_inputs_error() -> None:
    files = [InputFile(path=f"f{i}", content=b"") for i in range(5000)]  # had failed with ENOSPC: a SandboxError
    with pytest.raises(ValidationError, match="5000 files and directories"):
        Program(language="python", source="", files=files)
    nested = [InputFile(path=f"d{i}/f", content=b"") for i in range(1600)]  # the directories count too
    with pytest.raises(ValidationError, match="3200 files and directories"):
        Program(language="python", source="", files=nested)


async def test_input_files_past_the_work_dirs_size_are_the_inputs_error(fast_sandbox: AsyncSandbox) -> None:
    from dojo.errors import InputError
    from dojo.sandbox import Limits

    big = Program(language="python", source="print(1)", files=[InputFile(path="big", content=b"x" * (3 << 20))])
    with pytest.raises(InputError, match=r"more than limits\.disk"):
        await fast_sandbox.run(big, Limits(disk=2 << 20))
    many = [InputFile(path=f"d{i % 10}/f{i}", content=b"x") for i in range(3000)]
    counted = Program(language="python", source="import os\nprint(sum(len(f) for _, _, f in os.walk('.')))", files=many)
    result = await fast_sandbox.run(counted)  # 3,000 files and 10 directories: within the work dir
    assert result.verdict is Verdict.ACCEPTED and result.stdout.split() == ["3001"], result
