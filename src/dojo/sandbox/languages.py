"""Languages: how a source becomes a compile step and a run step inside a slot."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from dataclasses import dataclass, field

from dojo.sandbox.errors import LanguageUnavailable, UnknownLanguage


@dataclass(frozen=True)
class Language:
    """A language dojo can run. ``{exe}`` in argv templates is the resolved toolchain binary."""

    name: str
    source_file: str
    toolchain: str
    install_hint: str
    run_argv: tuple[str, ...]
    compile_argv: tuple[str, ...] | None = None
    aliases: tuple[str, ...] = field(default=())
    inline_python: bool = False
    # Virtual memory the runtime reserves beyond what it uses; added to RLIMIT_AS where memory is
    # limited by address space (rootless without cgroups). V8 reserves ~1 GiB up front.
    address_space_extra: int = 32 << 20

    @property
    def compiled(self) -> bool:
        return self.compile_argv is not None


LANGUAGES: dict[str, Language] = {
    lang.name: lang
    for lang in (
        Language(
            "python",
            "main.py",
            "python3",
            "apt-get install python3",
            ("{exe}", "-S", "-E", "-s", "-B", "main.py"),
            aliases=("python3", "py"),
            inline_python=True,
        ),
        Language(
            "bash",
            "main.sh",
            "bash",
            "apt-get install bash",
            ("{exe}", "main.sh"),
            aliases=("sh", "shell"),
        ),
        Language(
            "c",
            "main.c",
            "gcc",
            "apt-get install gcc",
            ("/box/main",),
            compile_argv=("{exe}", "-O2", "-std=gnu17", "-pipe", "-o", "main", "main.c", "-lm"),
        ),
        Language(
            "cpp",
            "main.cpp",
            "g++",
            "apt-get install g++",
            ("/box/main",),
            compile_argv=("{exe}", "-O2", "-std=gnu++17", "-pipe", "-o", "main", "main.cpp"),
            aliases=("c++", "cxx"),
        ),
        Language(
            "javascript",
            "main.js",
            "node",
            "apt-get install nodejs",
            ("{exe}", "main.js"),
            aliases=("js", "node", "nodejs"),
            address_space_extra=2 << 30,
        ),
    )
}
_ALIASES = {alias: lang for lang in LANGUAGES.values() for alias in (lang.name, *lang.aliases)}

# Toolchains must live under a path the slot's root exposes (read-only binds).
EXPOSED_PREFIXES = ("/usr/", "/bin/", "/sbin/", "/lib/", "/lib64/")
SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin"


def get_language(name: str) -> Language:
    lang = _ALIASES.get(name.strip().lower())
    if lang is None:
        known = ", ".join(sorted(LANGUAGES))
        raise UnknownLanguage(f"unknown language {name!r}; dojo runs: {known}")
    return lang


@functools.cache
def default_python() -> str:
    """The interpreter the sandbox runs Python with: the system one when present."""
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which("python3")
    if found is None:
        raise LanguageUnavailable("no python3 found for the sandbox; install it with: apt-get install python3")
    return os.path.realpath(found)


@functools.cache
def python_prefix(python: str) -> str:
    """The installation prefix of an interpreter (to expose it read-only inside slots)."""
    out = subprocess.run(
        [python, "-S", "-E", "-s", "-c", "import sys; print(sys.base_prefix)"],
        capture_output=True, text=True, timeout=30, check=True,
    )  # fmt: skip
    return out.stdout.strip()


@functools.cache
def resolve_toolchain(lang: Language, python: str | None = None) -> str:
    """Absolute path of the language's toolchain binary, or LanguageUnavailable naming the fix."""
    if lang.name == "python":
        return python or default_python()
    for directory in SANDBOX_PATH.split(":"):
        path = os.path.join(directory, lang.toolchain)
        if os.access(path, os.X_OK):
            return path
    found = shutil.which(lang.toolchain)
    if found and os.path.realpath(found).startswith(EXPOSED_PREFIXES):
        return found
    where = f" (found {found}, outside the directories a sandbox exposes)" if found else ""
    raise LanguageUnavailable(
        f"{lang.name} needs {lang.toolchain!r}, which is not installed{where}; install it with: {lang.install_hint}"
    )


def available_languages() -> list[str]:
    names = []
    for lang in LANGUAGES.values():
        try:
            resolve_toolchain(lang)
        except LanguageUnavailable:
            continue
        names.append(lang.name)
    return names
