"""Languages: each runs, reads stdin, reports compile errors; missing toolchains say what to install."""

from __future__ import annotations

import asyncio
import os

import pytest

from dojo.sandbox import AsyncSandbox, LanguageUnavailable, Limits, Program, UnknownLanguage, Verdict
from dojo.sandbox.languages import Language, get_language, provided_modules, resolve_toolchain

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


ECHO_SUM.update({
    "go": 'package main\nimport "fmt"\nfunc main(){ var a, b int; fmt.Scan(&a, &b); fmt.Println(a+b) }\n',
    "java": "import java.util.Scanner;\npublic class Main { public static void main(String[] a) {\n"
            "Scanner s = new Scanner(System.in); System.out.println(s.nextInt() + s.nextInt()); } }\n",
    "rust": "use std::io::Read;\nfn main() { let mut s = String::new(); std::io::stdin().read_to_string(&mut s)"
            ".unwrap();\nlet v: Vec<i64> = s.split_whitespace().map(|x| x.parse().unwrap()).collect();"
            ' println!("{}", v[0] + v[1]); }\n',
    "typescript": 'const s: number[] = require("fs").readFileSync(0, "utf8").split(/\\s+/).filter(Boolean)'
                  ".map(Number);\nconsole.log(s[0] + s[1]);\n",
    "ruby": "a, b = STDIN.read.split.map(&:to_i)\nputs a + b\n",
    "php": '$p = explode(" ", trim(file_get_contents("php://stdin")));\necho $p[0] + $p[1], "\\n";\n',
    "perl": 'my ($a, $b) = split " ", <STDIN>; print $a + $b, "\\n";\n',
    "lua": 'local a, b = io.read("*n", "*n")\nprint(math.floor(a + b))\n',
    "r": 'x <- scan(file("stdin"), quiet=TRUE)\ncat(x[1] + x[2], "\\n")\n',
    "csharp": "public class Program { public static void Main() { var p = Console.ReadLine().Split(' ');\n"
              "Console.WriteLine(int.Parse(p[0]) + int.Parse(p[1])); } }\n",
    "scala": "object Main { def main(args: Array[String]): Unit = {\n"
             'val p = scala.io.StdIn.readLine().trim.split(" ").map(_.toInt); println(p(0) + p(1)) } }\n',
    "racket": "#lang racket\n(define a (read)) (define b (read)) (displayln (+ a b))\n",
    "d": 'import std.stdio;\nvoid main() { int a, b; readf(" %d %d", &a, &b); writeln(a + b); }\n',
    "kotlin_script": 'val (a, b) = readLine()!!.trim().split(" ").map { it.toInt() }\nprintln(a + b)\n',
})  # fmt: skip
# programs that check themselves: (source, what stdout contains when it passes)
SELF_CHECKING = {
    "sql": ("CREATE TABLE t(x);\nINSERT INTO t VALUES (40), (2);\nSELECT sum(x) FROM t;\n", "42"),
    "pytest": ("def test_sum():\n    assert 40 + 2 == 42\n", "1 passed"),
    "go_test": ('package main\nimport (\n"testing"\n"github.com/stretchr/testify/assert"\n)\n'
                "func TestSum(t *testing.T) { assert.Equal(t, 42, 40+2) }\n", "ok"),
    "junit": ("import org.junit.jupiter.api.Test;\nimport static org.junit.jupiter.api.Assertions.assertEquals;\n"
              "public class SumTest { @Test void sum() { assertEquals(42, 40 + 2); } }\n", "1 tests successful"),
    "jest": ("import { expect, test } from '@jest/globals';\ntest('sum', () => { expect(40 + 2).toBe(42); });\n", ""),
    "verilog": ("module tb; initial begin $display(\"%0d\", 40 + 2); $finish; end endmodule\n", "42"),
    # a script's uncaught exception ends it with its trace on stderr, as SandboxFusion's tests expect
    "kotlin_script": ('if (40 + 2 != 42) throw Exception("wrong sum")\nprintln("sum ok")\n', "sum ok"),
    # luaunit (Debian's lua-unit, as SandboxFusion's image has it from LuaRocks)
    "lua": ("lu = require('luaunit')\nlu.assertEquals(40 + 2, 42)\nprint('sum ok')\n", "sum ok"),
}  # fmt: skip
LUAUNIT = "/usr/share/lua/5.4/luaunit.lua"
SLOW = Limits(wall_time=60, cpu_time=60, memory=1 << 30)


def usable(language: str) -> None:
    try:
        resolve_toolchain(get_language(language))
    except LanguageUnavailable as e:
        pytest.skip(str(e))


@pytest.mark.parametrize("language", sorted(ECHO_SUM))
async def test_each_language_reads_stdin(sandbox: AsyncSandbox, language: str) -> None:
    usable(language)
    r = await sandbox.run(
        Program(language=language, source=ECHO_SUM[language], stdin="40 2\n"), SLOW, compile_limits=SLOW
    )
    assert r.verdict is Verdict.ACCEPTED, r
    assert r.stdout.strip() == "42"


@pytest.mark.parametrize("language", sorted(SELF_CHECKING))
async def test_test_runners_pass_and_fail(fast_sandbox: AsyncSandbox, language: str) -> None:
    usable(language)
    if language == "lua" and not os.path.exists(LUAUNIT):
        pytest.skip(f"luaunit is not installed ({LUAUNIT}); install it with: apt-get install lua-unit")
    source, marker = SELF_CHECKING[language]
    r = await fast_sandbox.run(Program(language=language, source=source), SLOW, compile_limits=SLOW)
    assert r.verdict is Verdict.ACCEPTED, (r.stdout + r.stderr)[-2000:]
    assert marker in r.stdout + r.stderr
    broken = source.replace("40 + 2", "40 + 3").replace("40+2", "40+3").replace("(40)", "(41)")
    if language in ("sql", "verilog"):
        return  # they print; only test runners judge
    r = await fast_sandbox.run(Program(language=language, source=broken), SLOW, compile_limits=SLOW)
    assert r.verdict is Verdict.RUNTIME_ERROR, (r.stdout + r.stderr)[-2000:]
    if language in NO_TESTS:  # a run of no test passes nothing (JUnit's had been Accepted: "0 tests found")
        r = await fast_sandbox.run(Program(language=language, source=NO_TESTS[language]), SLOW, compile_limits=SLOW)
        assert r.verdict is Verdict.RUNTIME_ERROR, (r.stdout + r.stderr)[-2000:]


# test runners given no test they run (JUnit's default name filter takes SumTest, not Sum; go test
# passes a file without tests: not covered)
NO_TESTS = {
    "pytest": "def helper():\n    return 40 + 2\n",
    "junit": SELF_CHECKING["junit"][0].replace("SumTest", "Sum"),
    "jest": "const sum = 40 + 2;\n",
}


COMPILE_ERRORS = {
    "go": "package main\nfunc main() { undefined_name() }\n",
    "java": "public class Main { public static void main(String[] a) { undefined_name(); } }\n",
    "rust": 'fn main() { let x: i32 = "no"; }\n',
    "csharp": "public class Program { public static void Main() { undefined_name(); } }\n",
    "d": "void main() { undefined_name(); }\n",
    "scala": "object Main { def main(a: Array[String]): Unit = undefined_name() }\n",
    "c": "int main(void) { return undefined_name; }\n",
}


@pytest.mark.parametrize("language", sorted(COMPILE_ERRORS))
async def test_compile_errors_are_compile_errors(fast_sandbox: AsyncSandbox, language: str) -> None:
    usable(language)
    r = await fast_sandbox.run(Program(language=language, source=COMPILE_ERRORS[language]), SLOW)
    assert r.verdict is Verdict.COMPILE_ERROR, r
    assert r.compile is not None and r.compile.exit_code != 0
    assert ("mismatched types" if language == "rust" else "undefined_name") in r.stderr + r.stdout


POISON = r"""#include <stdio.h>
#include <unistd.h>
#include <sys/stat.h>
int main(void) {
    /* replace this very binary in the work dir: a later run of the same source must not run it */
    unlink("/box/main");
    FILE *f = fopen("/box/main", "w");
    if (f) { fputs("#!/bin/sh\necho pwned\n", f); fclose(f); chmod("/box/main", 0755); }
    puts("original NONCE");
    return 0;
}
"""


async def test_identical_source_compiles_once_and_no_run_can_touch_the_build(one_slot: AsyncSandbox) -> None:
    source = POISON.replace("NONCE", str(os.getpid()))
    cache = one_slot.builds
    first = await one_slot.run(Program(language="c", source=source))
    misses, hits = cache.misses, cache.hits
    again = await asyncio.gather(*(one_slot.run(Program(language="c", source=source)) for _ in range(3)))
    assert [r.stdout.split()[0] for r in (first, *again)] == ["original"] * 4
    assert cache.misses == misses and cache.hits == hits + 3  # compiled once, by the first run
    assert first.compile is not None and not first.compile.cached
    shown = first.compile.model_copy(update={"cached": True})  # each result still shows the compile step, as cached
    assert all(r.compile == shown for r in again)
    other = await one_slot.run(Program(language="c", source=source + "\n"))  # any change is another build
    assert other.stdout.startswith("original") and cache.misses == misses + 1


async def test_concurrent_identical_programs_share_one_compile(one_slot: AsyncSandbox) -> None:
    source = '#include <stdio.h>\nint main(void){int a; scanf("%d",&a); printf("%d\\n", a * 2); return 0;}\n'
    source += f"/* {os.getpid()} concurrent */\n"
    misses = one_slot.builds.misses
    results = await asyncio.gather(*(one_slot.run(Program(language="c", source=source, stdin=str(i)))
                                     for i in range(6)))  # fmt: skip
    assert [r.stdout.strip() for r in results] == [str(2 * i) for i in range(6)]
    assert one_slot.builds.misses == misses + 1


async def test_a_compile_error_is_cached_but_a_compile_timeout_is_not(one_slot: AsyncSandbox) -> None:
    broken = f"int main(void) {{ return undefined_{os.getpid()}; }}\n"
    first = await one_slot.run(Program(language="c", source=broken))
    hits = one_slot.builds.hits
    second = await one_slot.run(Program(language="c", source=broken))
    assert first.verdict is second.verdict is Verdict.COMPILE_ERROR and one_slot.builds.hits == hits + 1
    assert first.compile is not None and not first.compile.cached  # (the second did not compile: it says so)
    assert second.compile == first.compile.model_copy(update={"cached": True})


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


async def test_fetch_reads_with_the_runs_permissions_never_roots(sandbox: AsyncSandbox) -> None:
    """Root mode reads fetched files in the zygote with the run's uid as its filesystem identity,
    which drops root's file capabilities: a file of the run's that its mode closes, the zygote's
    environment, and a root-only file stay unread."""
    src = (
        "import os\nopen('locked', 'w').write('x')\nos.chmod('locked', 0)\n"
        "os.symlink('/proc/1/environ', 'env')\nos.symlink('/etc/shadow', 'shadow')\nopen('ok', 'w').write('y')\n"
    )
    r = await sandbox.run(Program(language="python", source=src, fetch=["locked", "env", "shadow", "ok"]))
    assert r.verdict is Verdict.ACCEPTED, r
    assert [r.files[p].content for p in ("locked", "env", "shadow")] == [None, None, None]
    assert r.files["ok"].content == b"y"  # and the fetch still reads what the run may read


async def test_fetch_reads_only_the_runs_own_files_never_the_zygotes(sandbox: AsyncSandbox) -> None:
    """The fetch is the zygote's, so ``/proc/self`` there is the zygote: a symlink to
    ``/proc/self/fd/N`` reopened its descriptors (the slot's cgroup files, its IPC tables) and
    ``/proc/self/cmdline`` showed its command line. Only files on the run's scratch file systems
    are read; a file the run wrote in /tmp or /dev/shm, and a symlink within /box, still are."""
    fds = [f"fd{i}" for i in range(24)]
    src = (
        "import os\n"
        "for i in range(24):\n    os.symlink(f'/proc/self/fd/{i}', f'fd{i}')\n"
        "for n in ('cmdline', 'status', 'maps', 'mountinfo'):\n    os.symlink(f'/proc/self/{n}', n)\n"
        "os.symlink('/proc/sysvipc/shm', 'shm')\nos.symlink('/usr/lib/os-release', 'release')\n"
        "open('/tmp/t.txt', 'w').write('tmp')\nos.symlink('/tmp/t.txt', 't')\n"
        "open('/dev/shm/s.txt', 'w').write('shm')\nos.symlink('/dev/shm/s.txt', 's')\n"
        "os.mkdir('out')\nopen('out/a.txt', 'w').write('box')\nos.symlink('out/a.txt', 'a')\n"
    )
    refused = [*fds, "cmdline", "status", "maps", "mountinfo", "shm", "release"]
    r = await sandbox.run(Program(language="python", source=src, fetch=[*refused, "t", "s", "a"]))
    assert r.verdict is Verdict.ACCEPTED, r
    read = {p: r.files[p].content for p in refused if r.files[p].content is not None}
    assert read == {}, read
    assert "not a file the run wrote" in (r.files["cmdline"].error or "")
    assert [r.files[p].content for p in ("t", "s", "a")] == [b"tmp", b"shm", b"box"]


async def test_fetched_files_hold_at_most_what_the_scratch_file_systems_do(sandbox: AsyncSandbox) -> None:
    """Distinct files are never cut by the fetch's total (``Limits.fetched_bytes``: the run's three
    scratch file systems), but one file fetched again through links is, so that an answer's size has
    a bound that does not grow with the number of paths fetched."""
    src = "import os\nopen('big', 'wb').write(b'x' * 700_000)\nfor i in range(6):\n    os.symlink('big', f'l{i}')\n"
    limits = Limits(disk=1 << 20)
    links = [f"l{i}" for i in range(6)]
    r = await sandbox.run(Program(language="python", source=src, fetch=links), limits)
    assert r.verdict is Verdict.ACCEPTED, r
    sizes = [len(r.files[p].content or b"") for p in links]
    assert sizes[:4] == [700_000] * 4 and sum(sizes) == limits.fetched_bytes == 3 << 20, sizes
    assert [r.files[p].truncated for p in links] == [False] * 4 + [True] * 2


async def test_fetch_reads_only_regular_files_and_never_waits(sandbox: AsyncSandbox) -> None:
    """A FIFO left at a fetched path (no writer: a blocking open would wait forever and the slot
    die) and a device are refused at once; the run's verdict is its own."""
    src = "import os\nos.mkfifo('report.xml')\nos.symlink('/dev/zero', 'zero')\nprint('done')\n"
    r = await sandbox.run(Program(language="python", source=src, fetch=["report.xml", "zero"]), Limits(wall_time=5))
    assert r.verdict is Verdict.ACCEPTED and r.stdout == "done\n", r
    assert r.files["report.xml"].content is None and r.files["zero"].content is None


async def test_unknown_language_is_a_clear_error(sandbox: AsyncSandbox) -> None:
    with pytest.raises(UnknownLanguage, match=r"dojo runs: bash, c, cpp, csharp, d, go, .*python, r, racket, ruby"):
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
    for bad in ["../etc/passwd", "a/../../b", "", "/tmp/../etc/shadow", "/tmp/\x00"]:
        with pytest.raises(ValidationError):
            Program(language="python", source="", fetch=[bad])


async def test_absolute_fetch_reads_as_the_run_and_mnt_is_scratch(sandbox: AsyncSandbox) -> None:
    """SandboxFusion's programs write to /mnt and /tmp and fetch them back by absolute path."""
    src = "open('/mnt/b', 'w').write('sauce'); open('/tmp/c', 'w').write('x')"
    r = await sandbox.run(Program(language="python", source=src, fetch=["/mnt/b", "/tmp/c", "/etc/shadow"]))
    assert r.files["/mnt/b"].content == b"sauce" and r.files["/tmp/c"].content == b"x"
    assert r.files["/etc/shadow"].content is None  # read as the run's uid: permission denied


def test_the_modules_a_pythons_files_provide() -> None:
    """What a fast run forgets of its zygote's modules (``guest.child.forget_modules``): every name a
    file of the work dir or of a ``PYTHONPATH`` folder can be imported by; nothing else (a
    ``vendor/numpy`` off the path had made ``import numpy`` fail in an environment that preloads it)."""
    paths = ["random.py", "string/__init__.py", "lib/tokenize.pyc", "ext.cpython-311-x86_64-linux-gnu.so",
             "data.csv", "notes.py.bak", "1x.py", "a.b.py", "pkg/mod.txt", "__init__.py", "vendor/numpy/__init__.py",
             "deep/x/json.py"]  # fmt: skip
    assert provided_modules(paths) == ["ext", "random", "string"]
    assert provided_modules(paths, "lib:/box/deep/x") == ["ext", "json", "random", "string", "tokenize"]
    assert provided_modules(["vendor/numpy/__init__.py"], "./vendor") == ["numpy"]
