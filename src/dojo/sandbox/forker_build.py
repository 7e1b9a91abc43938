"""Build the forker (``forker.c``): the C library each slot's zygote forks its runs through.

It is compiled once per machine with the system C compiler and kept under ``$DOJO_HOME/forker``
(default ``~/.cache/dojo/forker``), named by a hash of its source and the machine, so a changed
source builds anew and concurrent builders never see a half-written file. Where no compiler is
found or the build fails, ``forker_library`` says why once and returns None: slots then fork each
run from the zygote and set it up in Python (the same sandbox, about a fifth slower per run).
"""

from __future__ import annotations

import hashlib
import logging
import os
import platform
import shutil
import subprocess
import tempfile
from functools import cache
from pathlib import Path

from dojo.sandbox.home import dojo_home

SOURCE = Path(__file__).with_name("forker.c")
COMPILE_TIMEOUT_S = 60.0

log = logging.getLogger(__name__)


def compiler() -> str | None:
    """The C compiler to build with: ``$CC``, else ``cc`` or ``gcc`` on PATH."""
    explicit = os.environ.get("CC")
    if explicit:
        return shutil.which(explicit)
    return shutil.which("cc") or shutil.which("gcc")


def library_path(source: bytes) -> Path:
    digest = hashlib.sha256(source + platform.machine().encode()).hexdigest()[:16]
    return dojo_home() / "forker" / f"forker-{digest}.so"


@cache
def forker_library() -> str | None:
    """The built library's path, building it if needed; None (logged once) where it cannot be built."""
    try:
        return str(build())
    except (OSError, RuntimeError, subprocess.SubprocessError) as e:
        log.warning("dojo: the sandbox forker could not be built (%s); runs are forked from the zygote instead", e)
        return None


def build() -> Path:
    source = SOURCE.read_bytes()
    target = library_path(source)
    if target.is_file():
        return target
    cc = compiler()
    if cc is None:
        raise RuntimeError("no C compiler (cc or gcc) on PATH; set CC to one")
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".forker-", suffix=".so")
    os.close(fd)
    try:
        done = subprocess.run(
            [cc, "-O2", "-shared", "-fPIC", "-Wall", "-Wl,-z,now", "-o", tmp, str(SOURCE)],
            capture_output=True,
            text=True,
            timeout=COMPILE_TIMEOUT_S,
        )
        if done.returncode != 0:
            raise RuntimeError(f"{cc} failed: {done.stderr.strip()[-2000:]}")
        os.chmod(tmp, 0o755)  # a rootless slot's zygote reads it as the same user; a root one as root
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target
