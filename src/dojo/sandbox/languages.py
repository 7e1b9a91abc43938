"""Languages: how a source becomes a compile step and a run step inside a slot."""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from dojo.sandbox.bundle import program_source
from dojo.sandbox.errors import LanguageUnavailable, UnknownLanguage
from dojo.sandbox.guest import ending
from dojo.sandbox.home import dojo_home

JVM_RESERVE = 2 << 30  # V8, Mono, Go, Racket reserve far more address space than they use
# The JVM reserves a quarter of the machine's memory for its heap, 1 GiB of class space and a code
# cache up front: where memory is an address-space limit (rootless without a cgroup) it needs room.
JAVA_RESERVE = 16 << 30


@dataclass(frozen=True)
class Language:
    """A language dojo can run. In argv templates, ``{exe}`` is the resolved toolchain binary,
    ``{file}`` the source's file name, ``{toolchains}`` where the toolchain directory is mounted.

    A compiled language's compile step leaves ``artifacts`` for its run step: one file, or
    several (packed in a tar that the run step unpacks). The sandbox caches them by the source and
    input files, so identical source compiles once (``dojo.sandbox.builds``).
    """

    name: str
    source_file: str
    toolchain: str
    install_hint: str
    run_argv: tuple[str, ...]
    compile_argv: tuple[str, ...] | None = None
    artifacts: tuple[str, ...] = ()
    aliases: tuple[str, ...] = field(default=())
    inline_python: bool = False
    # Virtual memory the runtime reserves beyond what it uses; added to RLIMIT_AS where memory is
    # limited by address space (rootless without cgroups). V8 reserves ~1 GiB up front.
    address_space_extra: int = 32 << 20
    # source -> (file name, text written): a class name that must match the file, a missing tag
    prepare: Callable[[str], tuple[str, str]] | None = None
    support_files: tuple[tuple[str, str], ...] = ()  # (name, text) written beside the source
    env: tuple[tuple[str, str], ...] = ()  # extra environment variables of both steps
    requires: tuple[str, ...] = ()  # other files the language needs ({toolchains} is the host's dir)
    fusion: tuple[str, ...] = ()  # its names in SandboxFusion's /run_code

    @property
    def compiled(self) -> bool:
        return self.compile_argv is not None

    def source_name(self, source: str) -> tuple[str, str]:
        """The file the source is written to, and what is written there."""
        return self.prepare(source) if self.prepare else (self.source_file, source)


def _java_class(source: str, default: str = "Main") -> str:
    match = re.search(r"public\s+(?:final\s+|abstract\s+)*class\s+(\w+)", source)
    return match.group(1) if match else default


def _junit(source: str) -> tuple[str, str]:
    return f"{_java_class(source)}.java", source


def _php(source: str) -> tuple[str, str]:
    """SandboxFusion's rule: code without an opening tag gets one."""
    return "main.php", source if "<?php" in source else "<?php\n" + source


CSHARP_USINGS = ("System", "System.IO", "System.Collections.Generic", "System.Linq", "System.Threading",
                 "System.Threading.Tasks")  # fmt: skip


# A failed Debug.Assert ends a .NET program with its message on stderr; Mono's default listener
# only logs it. This listener (named in the program's config file) does what .NET does.
CSHARP_ASSERT = """using System;
using System.Diagnostics;
public sealed class DojoAssertListener : DefaultTraceListener {
    public override void Fail(string message) { Fail(message, null); }
    public override void Fail(string message, string detail) {
        Console.Out.Flush();
        Console.Error.WriteLine("Process terminated. Assertion failed.");
        if (!string.IsNullOrEmpty(message)) Console.Error.WriteLine(message);
        if (!string.IsNullOrEmpty(detail)) Console.Error.WriteLine(detail);
        Console.Error.WriteLine(new StackTrace(2, true).ToString());
        Console.Error.Flush();
        Environment.Exit(134);
    }
}
"""
CSHARP_CONFIG = """<?xml version="1.0" encoding="utf-8"?>
<configuration><system.diagnostics><trace><listeners><clear/>
<add name="dojo" type="DojoAssertListener, main"/></listeners></trace></system.diagnostics></configuration>
"""


def _csharp(source: str) -> tuple[str, str]:
    """`dotnet new console` projects import these namespaces implicitly; Mono's compiler does not."""
    missing = [ns for ns in CSHARP_USINGS if not re.search(rf"using\s+{re.escape(ns)}\s*;", source)]
    header = "".join(f"using {ns};\n" for ns in missing)
    return "Program.cs", (header + "#line 1\n" + source) if header else source


JEST_BABEL = """module.exports = {presets: [
  ["/opt/dojo/node/node_modules/@babel/preset-env", {targets: {node: "current"}}],
  "/opt/dojo/node/node_modules/@babel/preset-typescript"]};
"""
JEST_CONFIG = """{"testEnvironment": "node", "rootDir": "/box",
 "moduleDirectories": ["node_modules", "/opt/dojo/node/node_modules"],
 "transform": {"\\\\.[jt]sx?$": "/opt/dojo/node/node_modules/babel-jest"}, "cacheDirectory": "/tmp/jest",
 "watchman": false, "maxWorkers": 1}
"""
# `go test`'s own summary line around the compiled test binary (what SandboxFusion's users read).
GO_TEST_RUN = (
    'start=$(date +%s.%N); ./test.bin; rc=$?; t=$(echo "$(date +%s.%N) - $start" | bc 2>/dev/null || echo 0); '
    'if [ $rc -eq 0 ]; then printf "ok  \\tcommand-line-arguments\\t%.3fs\\n" "$t"; '
    'else printf "FAIL\\tcommand-line-arguments\\t%.3fs\\nFAIL\\n" "$t"; fi; exit $rc'
)
# SandboxFusion runs the first `object` it finds; no object is a compile error with its message.
SCALA_COMPILE = (
    "sed -n 's/.*object[[:space:]]\\+\\([A-Za-z_][A-Za-z0-9_]*\\).*/\\1/p' main.scala | head -1 > .dojo-scala-object; "
    "[ -s .dojo-scala-object ] || { echo 'Object name not found.' >&2; exit 1; }; "
    "{exe} main.scala && tar -cf .dojo-build.tar *.class .dojo-scala-object"
)


# GOPATH mode over Debian's Go sources (testify included); the warm cache of `make toolchains`
# (dojo.sandbox.toolchains) is built with exactly these, or its entries never match.
GO_ENV = {"GO111MODULE": "off", "GOPATH": "/usr/share/gocode", "CGO_ENABLED": "0"}
# npm packages `make toolchains` installs (SandboxFusion's runtime set): `require` finds them.
NODE_ENV = (("NODE_PATH", "/opt/dojo/node/node_modules"),)

# Variables of a program's environment that a slot's warm interpreter has read already (at its own
# start, with -E): a Python run that sets one starts an interpreter of its own (strict), which reads
# them as python3 does. PYTHONPATH a fast run honours (``guest.child.use_python_path``);
# PYTHONDONTWRITEBYTECODE changes nothing in a sandbox that never writes bytecode.
WARM_INTERPRETER_HONOURS = frozenset(("PYTHONPATH", "PYTHONDONTWRITEBYTECODE"))
SANDBOX_LOCALE = "C.UTF-8"  # every run's LANG and LC_ALL, where the program sets none (``runtime.build_request``)


def needs_fresh_interpreter(env: dict[str, str]) -> bool:
    """Whether a Python program's ``env`` asks what only a fresh interpreter gives: a ``PYTHON*``
    variable but those a warm one honours (``PYTHONHASHSEED``, ``PYTHONIOENCODING``,
    ``PYTHONWARNINGS``, ``PYTHONOPTIMIZE``, ...), ``TZ``, or a locale other than the sandbox's
    ``C.UTF-8`` (``LC_ALL``, ``LC_CTYPE``, ``LANG``: UTF-8 mode and the files' encoding). A fast run
    had ignored them (found 2026-12-06: ``PYTHONOPTIMIZE=1`` still ran asserts, ``TZ`` left
    ``time.tzname`` UTC; 2026-12-07: with ``LC_ALL=C`` python3 is in UTF-8 mode, and a fast run's
    ``open('f', 'w').write('é')`` failed)."""
    return any(
        (k.startswith("PYTHON") and k not in WARM_INTERPRETER_HONOURS)
        or k == "TZ"
        or ((k.startswith("LC_") or k == "LANG") and v != SANDBOX_LOCALE)
        for k, v in env.items()
    )


def provided_modules(paths: Iterable[str], python_path: str = "") -> list[str]:
    """The top-level names a Python run's files can be imported by: ``name.py`` (``.pyc``, an
    extension's ``.so``) and ``name/__init__.py`` in the main file's folder or in one of
    ``python_path``'s (the program's ``PYTHONPATH``, from the work dir). A fast run forgets a module
    of one of these names that its zygote imported ahead of it and python3 would not have by a
    script's start (``guest.child.forget_modules``), so that the program's own is imported, as
    python3 imports it. Only those: a module forgotten for a file off the path is imported again
    beside the first (numpy refuses to be; found by review, 2026-12-07)."""
    folders = {""} | {_work_dir_folder(p) for p in python_path.split(":") if p}
    found = set()
    for path in paths:
        folder, _, name = path.rpartition("/")
        stem, _, rest = name.partition(".")
        if stem == "__init__":
            folder, _, stem = folder.rpartition("/")
        if folder in folders and stem.isidentifier() and (rest in ("py", "pyc", "so") or rest.endswith(".so")):
            found.add(stem)
    return sorted(found)


def _work_dir_folder(entry: str) -> str:
    """A ``PYTHONPATH`` entry as a folder of the work dir (``""`` for the work dir itself), as python3
    resolves it from there; an entry outside it as itself (no file of the run's is there)."""
    folder = os.path.normpath(os.path.join("/box", entry))
    return "" if folder == "/box" else folder.removeprefix("/box/")


# A strict run's Python program, which runs main.py with Python's exit() and quit() (programs/python_main.py)
PYTHON_MAIN = program_source(Path(__file__).parent / "programs" / "python_main.py", (ending,))

LANGUAGES: dict[str, Language] = {
    lang.name: lang
    for lang in (
        Language(
            "python",
            "main.py",
            "python3",
            "apt-get install python3",
            ("{exe}", "-S", "-s", "-B", "-c", PYTHON_MAIN, "main.py"),  # (no -E: PYTHONPATH read, as python3 reads it)
            aliases=("python3", "py"),
            inline_python=True,
            fusion=("python", "python3"),
        ),
        Language(
            "bash",
            "main.sh",
            "bash",
            "apt-get install bash",
            ("{exe}", "main.sh"),
            aliases=("sh", "shell"),
            fusion=("bash",),
        ),
        Language(
            "c",
            "main.c",
            "gcc",
            "apt-get install gcc",
            ("/box/main",),
            compile_argv=("{exe}", "-O2", "-std=gnu17", "-pipe", "-o", "main", "main.c", "-lm"),
            artifacts=("main",),
            fusion=("c",),
        ),
        Language(
            "cpp",
            "main.cpp",
            "g++",
            "apt-get install g++",
            ("/box/main",),
            compile_argv=("{exe}", "-O2", "-std=gnu++17", "-pipe", "-o", "main", "main.cpp"),
            artifacts=("main",),
            aliases=("c++", "cxx"),
            fusion=("cpp",),
        ),
        Language(
            "javascript",
            "main.js",
            "node",
            "apt-get install nodejs",
            ("{exe}", "main.js"),
            aliases=("js", "node", "nodejs"),
            address_space_extra=JVM_RESERVE,
            env=NODE_ENV,
            fusion=("nodejs", "javascript", "js"),
        ),
        Language(
            "typescript",
            "main.ts",
            "node",
            "make toolchains (npm: tsx, typescript)",
            ("{exe}", "{toolchains}/node/node_modules/tsx/dist/cli.mjs", "main.ts"),
            aliases=("ts",),
            address_space_extra=JVM_RESERVE,
            requires=("{toolchains}/node/node_modules/tsx/dist/cli.mjs",),
            env=(("TSX_DISABLE_CACHE", "1"), *NODE_ENV),
            fusion=("typescript", "ts"),
        ),
        Language(
            "jest",
            "main.test.ts",
            "node",
            "make toolchains (npm: jest, babel-jest, @babel/preset-env, @babel/preset-typescript)",
            ("{exe}", "{toolchains}/node/node_modules/jest/bin/jest.js", "--ci", "--config", "jest.config.json"),
            address_space_extra=JVM_RESERVE,
            support_files=(("babel.config.js", JEST_BABEL), ("jest.config.json", JEST_CONFIG)),
            requires=("{toolchains}/node/node_modules/jest/bin/jest.js",),
            env=(("FORCE_COLOR", "0"), *NODE_ENV),
            fusion=("jest",),
        ),
        Language(
            "go",
            "main.go",
            "go",
            "apt-get install golang-go",
            ("/box/out",),
            compile_argv=("{exe}", "build", "-o", "out", "main.go"),
            artifacts=("out",),
            address_space_extra=JVM_RESERVE,
            env=(*GO_ENV.items(), ("GOCACHE", "/tmp/.gocache")),
            fusion=("go", "golang"),
        ),
        Language(
            "go_test",
            "main_test.go",
            "go",
            "apt-get install golang-go golang-github-stretchr-testify-dev; make toolchains (a warm build cache)",
            ("/bin/bash", "-c", GO_TEST_RUN),
            compile_argv=(
                "/bin/bash",
                "-c",
                "cp -r {toolchains}/go/cache /tmp/.gocache 2>/dev/null; {exe} test -c -o test.bin main_test.go",
            ),
            artifacts=("test.bin",),
            address_space_extra=JVM_RESERVE,
            env=(*GO_ENV.items(), ("GOCACHE", "/tmp/.gocache")),
            fusion=("go_test",),
        ),
        Language(
            "java",
            "Main.java",
            "javac",
            "apt-get install default-jdk-headless libjavatuples-java",
            ("java", "-cp", ".:/usr/share/java/javatuples.jar", "-ea", "Main"),
            compile_argv=(
                "/bin/bash",
                "-c",
                "{exe} -cp .:/usr/share/java/javatuples.jar -d . Main.java && tar -cf .dojo-build.tar *.class",
            ),
            artifacts=(".dojo-build.tar",),
            address_space_extra=JAVA_RESERVE,
            fusion=("java",),
        ),
        Language(
            "junit",
            "Main.java",
            "javac",
            "apt-get install default-jdk-headless junit5",
            (
                "java",
                "-jar",
                "/usr/share/java/junit-platform-console-standalone.jar",
                "--class-path",
                ".",
                "--scan-class-path",
                "--fail-if-no-tests",  # (a class JUnit's name filter skips ran nothing and was Accepted)
                "--disable-banner",
                "--details=tree",
                "--disable-ansi-colors",
            ),
            compile_argv=(
                "/bin/bash",
                "-c",
                "{exe} -cp .:/usr/share/java/junit-platform-console-standalone.jar "
                "-d . *.java && tar -cf .dojo-build.tar $(find . -name '*.class')",
            ),
            artifacts=(".dojo-build.tar",),
            address_space_extra=JAVA_RESERVE,
            prepare=_junit,
            requires=("/usr/share/java/junit-platform-console-standalone.jar",),
            fusion=("junit",),
        ),
        Language(
            "rust",
            "main.rs",
            "rustc",
            "apt-get install rustc",
            ("/box/test",),
            compile_argv=("{exe}", "main.rs", "-o", "test"),
            artifacts=("test",),
            aliases=("rs",),
            address_space_extra=JVM_RESERVE,  # rustc (LLVM) maps far more than it uses
            fusion=("rust",),
        ),
        Language(
            "csharp",
            "Program.cs",
            "mcs",
            "apt-get install mono-mcs",
            ("mono", "--debug", "main.exe"),
            compile_argv=(
                "/bin/bash",
                "-c",
                "{exe} -d:DEBUG -debug -out:main.exe Program.cs DojoAssert.cs && "
                "tar -cf .dojo-build.tar main.exe main.exe.mdb main.exe.config",
            ),
            artifacts=(".dojo-build.tar",),
            support_files=(("DojoAssert.cs", CSHARP_ASSERT), ("main.exe.config", CSHARP_CONFIG)),
            aliases=("c#", "cs"),
            address_space_extra=JVM_RESERVE,
            prepare=_csharp,
            env=(("MONO_ENV_OPTIONS", "--gc=sgen"), ("TERM", "dumb")),
            fusion=("csharp",),
        ),
        Language(
            "scala",
            "main.scala",
            "scalac",
            "apt-get install scala",
            ("/bin/bash", "-c", 'exec scala -nc -cp . "$(cat .dojo-scala-object)"'),
            compile_argv=("/bin/bash", "-c", SCALA_COMPILE),
            artifacts=(".dojo-build.tar",),
            address_space_extra=JAVA_RESERVE,
            fusion=("scala",),
        ),
        Language(
            "kotlin_script",
            "main.kts",
            "kotlinc",
            "apt-get install kotlin",
            # Debian's Kotlin (1.3) runs a script with `kotlinc -script` (its `kotlin` runner cannot);
            # compiled and run in one JVM, as SandboxFusion's `kotlin main.kts` does, so the run's
            # limits cover the compile. Its launcher passes -noverify, which JDK 13+ warns about on
            # stderr: that warning is the launcher's, not the program's.
            ("{exe}", "-script", "main.kts"),
            aliases=("kts", "kotlin"),
            address_space_extra=JAVA_RESERVE,
            env=(("JAVA_OPTS", "-XX:-PrintWarnings"),),
            fusion=("kotlin_script",),
        ),
        Language(
            "d",
            "main.d",
            "ldmd2",
            "apt-get install ldc",
            ("/box/test",),
            compile_argv=("{exe}", "main.d", "-unittest", "-of=test"),
            artifacts=("test",),
            aliases=("d_ut",),
            fusion=("D_ut", "d"),
        ),
        Language(
            "verilog",
            "main.sv",
            "iverilog",
            "apt-get install iverilog",
            ("vvp", "-n", "test.vvp"),
            compile_argv=(
                "{exe}",
                "-Wall",
                "-Winfloop",
                "-Wno-timescale",
                "-g2012",
                "-s",
                "tb",
                "-o",
                "test.vvp",
                "main.sv",
            ),
            artifacts=("test.vvp",),
            fusion=("verilog",),
        ),
        Language(
            "ruby", "main.rb", "ruby", "apt-get install ruby", ("{exe}", "main.rb"), aliases=("rb",), fusion=("ruby",)
        ),
        Language(
            "php",
            "main.php",
            "php",
            "apt-get install php-cli",
            ("{exe}", "-f", "main.php"),
            prepare=_php,
            fusion=("php",),
        ),
        Language(
            "perl", "main.pl", "perl", "apt-get install perl", ("{exe}", "main.pl"), aliases=("pl",), fusion=("perl",)
        ),
        Language("lua", "main.lua", "lua", "apt-get install lua5.4", ("{exe}", "main.lua"), fusion=("lua",)),
        Language(
            "r",
            "main.R",
            "Rscript",
            "apt-get install r-base-core",
            ("{exe}", "main.R"),
            address_space_extra=JVM_RESERVE,
            fusion=("R", "r"),
        ),
        Language(
            "racket",
            "main.rkt",
            "racket",
            "apt-get install racket",
            ("{exe}", "main.rkt"),
            address_space_extra=JVM_RESERVE,
            fusion=("racket",),
        ),
        Language(
            "sql",
            "main.sql",
            "sqlite3",
            "apt-get install sqlite3",
            (
                "/bin/bash",
                "-c",
                # a db.sql beside the query (a task's database as SQL text) is read first
                'init=(); if [ -f db.sql ]; then init=(-cmd ".read db.sql"); fi; '
                'exec {exe} -bail -batch "$(if [ -f db.sqlite ]; then echo db.sqlite; '
                'else echo :memory:; fi)" "${init[@]}" < main.sql',
            ),
            aliases=("sqlite",),
            fusion=("sql",),
        ),
        Language(
            "pytest",
            "test_main.py",
            "python3",
            "apt-get install python3-pytest",
            ("{exe}", "-B", "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_main.py"),
            requires=("/usr/lib/python3/dist-packages/pytest",),
            fusion=("pytest",),
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


TOOLCHAINS_MOUNT = "/opt/dojo"  # where runs see the toolchain directory (npm packages for TS, Jest)


def toolchains_dir() -> Path:
    """The host's toolchain directory (``make toolchains`` fills it): ``$DOJO_TOOLCHAINS``, or
    ``$DOJO_HOME/toolchains``, or ``~/.cache/dojo/toolchains``."""
    explicit = os.environ.get("DOJO_TOOLCHAINS")
    if explicit:
        return Path(explicit)
    return dojo_home() / "toolchains"


@functools.cache
def resolve_toolchain(lang: Language, python: str | None = None) -> str:
    """Absolute path of the language's toolchain binary, or LanguageUnavailable naming the fix."""
    if lang.name == "python":
        return python or default_python()
    exe = _find(lang.toolchain)
    if exe is None:
        found = shutil.which(lang.toolchain)
        where = f" (found {found}, outside the directories a sandbox exposes)" if found else ""
        raise LanguageUnavailable(
            f"{lang.name} needs {lang.toolchain!r}, which is not installed{where}; install it with: {lang.install_hint}"
        )
    for needed in lang.requires:
        path = needed.replace("{toolchains}", str(toolchains_dir()))
        if not os.path.exists(path):
            raise LanguageUnavailable(
                f"{lang.name} needs {path}, which is missing; install it with: {lang.install_hint}"
            )
    return exe


def find_tool(tool: str, lang: Language) -> str:
    """The path of a tool a language's steps run besides its toolchain (``java``, ``mono``)."""
    path = _find(tool)
    if path is None:
        raise LanguageUnavailable(
            f"{lang.name} needs {tool!r}, which is not installed; install it with: {lang.install_hint}"
        )
    return path


def _find(tool: str) -> str | None:
    for directory in SANDBOX_PATH.split(":"):
        path = os.path.join(directory, tool)
        if os.access(path, os.X_OK):
            return path
    found = shutil.which(tool)
    if found and os.path.realpath(found).startswith(EXPOSED_PREFIXES):
        return found
    return None


def available_languages() -> list[str]:
    names = []
    for lang in LANGUAGES.values():
        try:
            resolve_toolchain(lang)
        except LanguageUnavailable:
            continue
        names.append(lang.name)
    return names


def language_status() -> list[tuple[Language, str | None]]:
    """Every language with None when it can run here, or why not (what to install)."""
    out: list[tuple[Language, str | None]] = []
    for lang in LANGUAGES.values():
        try:
            resolve_toolchain(lang)
            out.append((lang, None))
        except LanguageUnavailable as e:
            out.append((lang, str(e)))
    return out
