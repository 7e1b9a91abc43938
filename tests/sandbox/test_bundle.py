"""A sandbox program shipped from its file with the shared modules it imports."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dojo.sandbox.bundle import PREAMBLE, program_source
from dojo.tasks import values

MAIN = '''"""A program."""

from __future__ import annotations

from dojo.tasks.values import encode_value


def main() -> None:
    print(encode_value((1, b"x")), encode_value.__code__.co_filename)


if __name__ == "__main__":
    main()
'''
AFTER = "import sys\nprint(sorted(name for name in sys.modules if name.startswith('dojo')))\n"


def test_the_shared_modules_come_from_their_text_before_the_programs_imports(tmp_path: Path) -> None:
    main = tmp_path / "program.py"
    main.write_text(MAIN)
    source = program_source(main, (values,))
    assert source.startswith('"""A program."""\n\nfrom __future__ import annotations\n')  # still first
    assert MAIN.split("annotations\n", 1)[1] in source
    # run where no dojo package can be imported: the module is the text the program carries
    out = subprocess.run([sys.executable, "-I", "-c", source + AFTER], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout == f"{{'$t': [1, {{'$b': 'eA=='}}]}} {values.__file__}\n[]\n"  # then gone from sys.modules


def test_a_program_without_shared_modules_is_its_file(tmp_path: Path) -> None:
    main = tmp_path / "plain.py"
    main.write_text("print(1)\n")
    assert program_source(main) == "print(1)\n"
    with pytest.raises(ValueError, match="no sandbox program 'absent'"):
        program_source(tmp_path / "absent.py")
    assert len(PREAMBLE.splitlines()) < 20
