"""A sandbox program shipped from its file with the shared modules it imports."""

from __future__ import annotations

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


def test_the_shared_modules_come_from_their_text_before_the_programs_imports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    main = tmp_path / "program.py"
    main.write_text(MAIN)
    source = program_source(main, (values,))
    assert source.startswith('"""A program."""\n\nfrom __future__ import annotations\n')  # still first
    assert MAIN.split("annotations\n", 1)[1] in source
    # here no dojo.tasks.values can be imported: the program's is the text it carries
    monkeypatch.setitem(sys.modules, "dojo.tasks.values", None)
    # run as a fresh interpreter's main module, it keeps no sys.path entry it could write (a copy here)
    monkeypatch.setattr(sys, "path", [str(tmp_path), "", *sys.path])
    exec(compile(source, "program", "exec", dont_inherit=True), {"__name__": "__main__"})
    assert capsys.readouterr().out == f"{{'$t': [1, {{'$b': 'eA=='}}]}} {values.__file__}\n"
    assert str(tmp_path) not in sys.path and "" not in sys.path
    assert "dojo.tasks.values" not in sys.modules  # and it is gone once the program's top level has run


def test_a_program_without_shared_modules_is_its_file(tmp_path: Path) -> None:
    main = tmp_path / "plain.py"
    main.write_text("print(1)\n")
    assert program_source(main) == "print(1)\n"
    with pytest.raises(ValueError, match="no sandbox program 'absent'"):
        program_source(tmp_path / "absent.py")
    assert len(PREAMBLE.splitlines()) < 20
