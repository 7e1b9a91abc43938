"""Languages: each runs, reads stdin, reports compile errors; missing toolchains say what to install."""

from __future__ import annotations

import shutil

import pytest

from dojo.sandbox import AsyncSandbox, LanguageUnavailable, Program, UnknownLanguage, Verdict
from dojo.sandbox.languages import Language, resolve_toolchain

ECHO_SUM = {
    "python": "import sys\nprint(sum(int(x) for x in sys.stdin.read().split()))\n",
    "bash": "read a b\necho $((a + b))\n",
    "c": '#include <stdio.h>\nint main(void){int a,b;scanf("%d %d",&a,&b);printf("%d\\n",a+b);return 0;}\n',
    "cpp": "#include <iostream>\nint main(){int a,b;std::cin>>a>>b;std::cout<<a+b<<std::endl;}\n",
    "javascript": (
        "const s=require('fs').readFileSync(0,'utf8').split(/\\s+/).filter(Boolean).map(Number);\n"
        "console.log(s[0]+s[1]);\n"
    ),
}
TOOLCHAIN = {"python": "python3", "bash": "bash", "c": "gcc", "cpp": "g++", "javascript": "node"}


@pytest.mark.parametrize("language", sorted(ECHO_SUM))
async def test_each_language_reads_stdin(sandbox: AsyncSandbox, language: str) -> None:
    if shutil.which(TOOLCHAIN[language]) is None:
        pytest.skip(f"{TOOLCHAIN[language]} not installed")
    r = await sandbox.run(Program(language=language, source=ECHO_SUM[language], stdin="40 2\n"))
    assert r.verdict is Verdict.ACCEPTED, r
    assert r.stdout.strip() == "42"


async def test_cpp_compile_error(sandbox: AsyncSandbox) -> None:
    r = await sandbox.run(Program(language="c++", source="int main() { return nope; }"))
    assert r.verdict is Verdict.COMPILE_ERROR
    assert "nope" in r.stderr and "error" in r.stderr


async def test_input_files_and_fetch(sandbox: AsyncSandbox) -> None:
    from dojo.sandbox import InputFile

    src = "import helper\nopen('out/result.txt', 'w').write(helper.VALUE * 2)\n"
    import os

    r = await sandbox.run(
        Program(
            language="python",
            source="import os\nos.makedirs('out')\n" + src,
            files=[InputFile(path="helper.py", content=b"VALUE = 'ab'\n")],
            fetch=["out/result.txt", "missing.txt"],
        )
    )
    assert r.verdict is Verdict.ACCEPTED, r
    assert r.files["out/result.txt"].content == b"abab"
    assert r.files["missing.txt"].content is None and r.files["missing.txt"].error
    assert os.path.exists("/etc/passwd")


async def test_fetch_does_not_follow_symlinks_out_of_reach(sandbox: AsyncSandbox) -> None:
    src = "import os\nos.symlink('/etc/shadow', 'leak')\n"
    r = await sandbox.run(Program(language="python", source=src, fetch=["leak"]))
    assert r.files["leak"].content is None  # read as the run's uid: permission denied


async def test_unknown_language_is_a_clear_error(sandbox: AsyncSandbox) -> None:
    with pytest.raises(UnknownLanguage, match="dojo runs: bash, c, cpp, javascript, python"):
        await sandbox.run(Program(language="cobol", source="x"))


def test_missing_toolchain_names_the_fix() -> None:
    lang = Language("zig", "main.zig", "zig-not-installed", "apt-get install zig", ("{exe}", "run", "main.zig"))
    with pytest.raises(LanguageUnavailable, match="install it with: apt-get install zig"):
        resolve_toolchain(lang)


def test_program_rejects_path_traversal() -> None:
    from pydantic import ValidationError

    from dojo.sandbox import InputFile

    for bad in ["../etc/passwd", "/etc/passwd", "a/../../b", ""]:
        with pytest.raises(ValidationError):
            InputFile(path=bad, content=b"")
        with pytest.raises(ValidationError):
            Program(language="python", source="", fetch=[bad])
