"""Reading a text file a user names (a config, a rule set, a program, a requirements list, labels):
one place that turns what can be wrong with it into an ``InputError`` that says which file, what is
wrong and how to fix it. Each of these had been a ``UnicodeDecodeError`` or ``IsADirectoryError``
traceback, or a "does not exist" for a directory that does (the CLI review of 2026-12-06).
"""

from __future__ import annotations

from pathlib import Path

from dojo.errors import InputError


def read_user_text(path: str | Path, what: str = "file") -> str:
    """The UTF-8 text of ``path`` (a byte-order mark is dropped); ``what`` names it in errors
    ("config file", "--rules", ...)."""
    p = Path(path)
    if p.is_dir():
        raise InputError(f"{what} {str(p)!r} is a directory; give a file")
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise InputError(f"{what} {str(p)!r} does not exist") from None
    except OSError as e:
        raise InputError(f"{what} {str(p)!r} cannot be read: {e.strerror or e}") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise InputError(
            f"{what} {str(p)!r} line {line}: not UTF-8 text (byte 0x{data[e.start]:02x}); save it as UTF-8"
        ) from None
