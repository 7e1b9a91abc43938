"""A Python run behaves as ``python3 main.py`` does, in a fast slot (a process forked from a warm
interpreter) as in a strict one (a fresh interpreter): each case here was a difference found by a
comparison of the two with python3 (2026-12-06), most of them the fast path's alone."""

from __future__ import annotations

import gzip
import re

import pytest

from dojo.sandbox import AsyncSandbox, ExecutionResult, InputFile, Limits, Program, Verdict


async def run(sandbox: AsyncSandbox, source: str) -> ExecutionResult:
    return await sandbox.run(Program(language="python", source=source))


async def test_stdin_reads_carriage_returns_as_they_are(sandbox: AsyncSandbox) -> None:
    """Python's stdin translates no newline on POSIX: a fast run's had read ``"abc\\r\\n"`` as
    ``"abc"`` (a program that forgot ``strip()`` passed here and failed under python3)."""
    source = "import sys\ns = input()\nprint(repr(s), repr(sys.stdin.read()))\n"
    r = await sandbox.run(Program(language="python", source=source, stdin="abc\r\nx\ry\n"))
    assert r.stdout == "'abc\\r' 'x\\ry\\n'\n", r.stderr


@pytest.mark.parametrize(
    ("language", "source"),
    [
        ("bash", "echo out > /dev/stdout\necho err > /dev/stderr\ncat /dev/stdin\n"),
        (
            "python",
            "print(open('/dev/stdin').read(), end='')\nopen('/dev/stdout', 'w').write('out\\n')\n"
            "open('/dev/stderr', 'w').write('err\\n')\n",
        ),
    ],
)
async def test_a_program_opens_its_standard_streams_by_name(sandbox: AsyncSandbox, language: str, source: str) -> None:
    """``echo x > /dev/stderr``: the pipes were root's, mode 0600, and the run's user was refused."""
    r = await sandbox.run(Program(language=language, source=source, stdin="in\n"))
    assert r.verdict is Verdict.ACCEPTED, r.stderr
    assert sorted(r.stdout.splitlines()) == ["in", "out"] and r.stderr == "err\n"


@pytest.mark.parametrize(
    "rebind", ["sys.stdout = open(os.devnull, 'w')", "sys.stdout = io.StringIO()", "del sys.stdout"]
)
async def test_what_was_printed_before_stdout_was_rebound_is_kept(sandbox: AsyncSandbox, rebind: str) -> None:
    r = await run(sandbox, f"import io, os, sys\nprint('answer 42')\n{rebind}\nprint('hidden')\n")
    assert r.stdout == "answer 42\n", r.stderr


async def test_the_programs_output_comes_before_what_its_exit_handlers_print(sandbox: AsyncSandbox) -> None:
    """Python flushes a script's output when its code ends, before its threads are waited for and
    its exit handlers run: a handler's child process printed before the program's own line."""
    source = "import atexit, subprocess\natexit.register(lambda: subprocess.run(['echo', 'from the handler']))\n"
    r = await run(sandbox, source + "print('answer')\n")
    assert r.stdout == "answer\nfrom the handler\n", r.stderr


FINALISED = {
    "a gzip file left open": "import gzip\nf = gzip.open('out', 'wt')\nf.write('hello ' * 50)\n",
    # (a function makes the globals a cycle: a collection finalised the file before its writers)
    "a file left open by a program with a function": "def rows():\n    return 'hello ' * 50\n"
    "f = open('out', 'w')\nf.write(rows())\n",
    "a gzip file left open by a program with a function": "import gzip\ndef rows():\n    return 'hello ' * 50\n"
    "f = gzip.open('out', 'wt')\nf.write(rows())\n",
    "a file left open by a thread": "import threading\nopened = {}\ndef w():\n    opened['f'] = open('out', 'w')\n"
    "    opened['f'].write('hello ' * 50)\nt = threading.Thread(target=w)\nt.start()\nt.join()\n",
    "an object that writes its file when it is deleted": "class Report:\n    def __init__(self):\n"
    "        self.f, self.lines = open('out', 'w'), []\n    def __del__(self):\n"
    "        self.f.write(''.join(self.lines))\n        self.f.close()\n"
    "r = Report()\nr.lines += ['hello '] * 50\n",
    "an object whose __del__ uses the program's globals": "import json\nclass Report:\n"
    "    def __init__(self):\n        self.f = open('out', 'w')\n    def __del__(self):\n"
    "        json.dump(['hello'] * 2, self.f)\n        self.f.close()\nr = Report()\n",
}


@pytest.mark.parametrize("case", list(FINALISED))
async def test_the_programs_objects_are_finalised_as_python_finalises_them(sandbox: AsyncSandbox, case: str) -> None:
    """A fast run ends with ``os._exit``: a ``gzip`` file left open had no trailer (unreadable), a
    ``__del__`` never ran. (A ``__del__`` that looks
    up ``open`` is left out: Python's builtins are back to what they were before ``open`` was set.)"""
    r = await sandbox.run(Program(language="python", source=FINALISED[case], fetch=["out"]))
    assert r.verdict is Verdict.ACCEPTED, r.stderr
    if "globals" in case:  # (Python collects the program's objects with its globals still whole)
        assert (r.files["out"].content, r.stderr) == (b'["hello", "hello"]', ""), r.stderr
    else:
        content = r.files["out"].content
        assert (gzip.decompress(content) if "gzip" in case else content) == b"hello " * 50, case


async def test_a_file_left_open_by_a_program_of_many_objects_is_written_out(sandbox: AsyncSandbox) -> None:
    """300,000 objects of the program's own: the end-of-run flush had skipped any program past 250,000
    blocks (its list of objects would cost memory), and left the answer empty."""
    source = "def n(rows):\n    return len(rows)\n"  # (a function: the globals a cycle, see FINALISED)
    source += "rows = [{'i': i} for i in range(300_000)]\nf = open('answer.txt', 'w')\nf.write(str(n(rows)))\n"
    r = await sandbox.run(Program(language="python", source=source, fetch=["answer.txt"]))
    assert r.files["answer.txt"].content == b"300000", r.stderr


async def test_the_main_module_and_the_streams_look_as_a_scripts_do(sandbox: AsyncSandbox) -> None:
    source = (
        "print(sorted(globals()), __cached__, type(__loader__).__name__)\nimport sys\n"
        "print(sys.stdin.name, sys.stdout.name, sys.stderr.name, sys.stdin.mode, sys.stdout.mode)\n"
    )
    r = await run(sandbox, source)
    names = ["__annotations__", "__builtins__", "__cached__", "__doc__", "__file__", "__loader__", "__name__",
             "__package__", "__spec__"]  # fmt: skip
    assert r.stdout == f"{names} None SourceFileLoader\n<stdin> <stdout> <stderr> r w\n", r.stderr


@pytest.mark.parametrize(
    ("env", "source", "expected"),
    [
        ({"PYTHONOPTIMIZE": "1"}, "assert False\nprint('no assert')\n", "no assert\n"),
        ({"TZ": "EST5EDT"}, "import time\nprint(time.tzname)\n", "('EST', 'EDT')\n"),
        ({"PYTHONIOENCODING": "latin-1"}, "import sys\nprint(sys.stdout.encoding)\n", "iso8859-1\n"),
        # (the C locale: python3 in UTF-8 mode, where a fast run's files had been ASCII)
        ({"LC_ALL": "C"}, "import sys\nopen('f', 'w').write('\u00e9')\nprint(sys.flags.utf8_mode)\n", "1\n"),
    ],
)
async def test_python_variables_of_the_programs_environment_are_read(
    sandbox: AsyncSandbox, env: dict[str, str], source: str, expected: str
) -> None:
    """A warm interpreter has read its environment at its start: a fast run that sets one of these
    runs in an interpreter of its own, as a strict one does (a fast run had ignored them)."""
    r = await sandbox.run(Program(language="python", source=source, env=env))
    assert r.stdout == expected, r.stderr


async def test_a_hash_seed_gives_python3s_hashes(sandbox: AsyncSandbox) -> None:
    program = Program(language="python", source="print(hash('abc'))\n", env={"PYTHONHASHSEED": "0"})
    r, fresh = await sandbox.run(program), await sandbox.run(program, isolation="strict")
    assert r.stdout == fresh.stdout == "-4594863902769663758\n", r.stderr  # (64-bit CPython 3.11's, seed 0)


async def test_no_pythonpath_entry_outlives_its_run(one_slot: AsyncSandbox) -> None:
    """The same environment twice running becomes the forker's (respawned with its PYTHONPATH); a
    run after them without it must not find their entries."""
    mine = [InputFile(path="lib/mine.py", content=b"V = 7\n")]
    with_path = Program(language="python", source="import mine\nprint(mine.V)\n", files=mine,
                        env={"PYTHONPATH": "lib"})  # fmt: skip
    for _ in range(3):
        assert (await one_slot.run(with_path)).stdout == "7\n"
    r = await one_slot.run(Program(language="python", source="import sys, mine\n", files=mine))
    assert "ModuleNotFoundError" in r.stderr, r


async def test_a_daemon_thread_blocked_in_a_write_does_not_hold_up_the_programs_end(sandbox: AsyncSandbox) -> None:
    """The thread holds its writer's lock, blocked on a full pipe: Python's exit leaves what the
    thread holds alone; the end-of-run flush had waited for that lock until the wall limit."""
    source = (
        "import os, threading, time\nr, w = os.pipe()\nf = os.fdopen(w, 'wb', buffering=65536)\n"
        "threading.Thread(target=lambda: f.write(b'x' * 200_000), daemon=True).start()\n"
        "time.sleep(0.3)\nprint('main done')\n"
    )
    r = await sandbox.run(Program(language="python", source=source), Limits(wall_time=5, cpu_time=5))
    assert (r.verdict, r.stdout) == (Verdict.ACCEPTED, "main done\n"), r


MINE = b"def randint(a, b):\n    return 'mine'\n"
# a module of the program's own, named as one a fast run's zygote imported ahead of it: (its path, its
# name, the run's environment)
SHADOWING = {
    "module": ("random.py", "random", {}),
    "package": ("string/__init__.py", "string", {}),
    "on PYTHONPATH": ("lib/tokenize.py", "tokenize", {"PYTHONPATH": "lib"}),
}


@pytest.mark.parametrize("case", list(SHADOWING))
async def test_a_module_of_the_programs_own_is_the_one_imported(sandbox: AsyncSandbox, case: str) -> None:
    """python3 imports a script's ``random.py`` for its ``import random``; a fast run had imported
    the standard library's, which its zygote had imported ahead of it (a helper module named as a
    standard one passed here and failed under python3, or the other way round)."""
    path, name, env = SHADOWING[case]
    source, files = f"import {name}\nprint({name}.randint(1, 2))\n", [InputFile(path=path, content=MINE)]
    r = await sandbox.run(Program(language="python", source=source, files=files, env=env))
    assert r.stdout == "mine\n", r.stderr


async def test_a_future_module_of_the_runs_is_never_imported(sandbox: AsyncSandbox) -> None:
    """``from __future__ import annotations`` is the first line of trusted programs that run with a
    request's files (``/run_jupyter``'s driver), before their bundle keeps the run's folders off the
    path: a run's own ``__future__.py`` ran there once a fast run forgot the preloaded one (review)."""
    files = [InputFile(path="__future__.py", content=b"print('planted')\nMINE = 1\n")]
    source = "from __future__ import annotations\nimport __future__\nprint(hasattr(__future__, 'MINE'))\n"
    r = await sandbox.run(Program(language="python", source=source, files=files))
    assert r.stdout == "False\n", r.stderr


async def test_a_module_python3_has_at_its_start_is_not_the_programs(sandbox: AsyncSandbox) -> None:
    """``os`` is imported before any script runs: a script's ``os.py`` is not what ``import os`` finds."""
    files = [InputFile(path="os.py", content=b"getcwd = None\n")]
    r = await sandbox.run(Program(language="python", source="import os\nprint(os.getcwd())\n", files=files))
    assert r.stdout == "/box\n", r.stderr


async def test_the_next_run_imports_the_standard_module_again(one_slot: AsyncSandbox) -> None:
    """A run forgets the zygote's module in its own process only: the next run of the slot, without
    the file, has the standard library's, drawing numbers of its own."""
    files = [InputFile(path="random.py", content=MINE)]
    mine = Program(language="python", source="import random\nprint(random.randint(1, 2))\n", files=files)
    plain = Program(language="python", source="import random\nprint(random.getrandbits(64))\n")
    for _ in range(2):
        assert (await one_slot.run(mine)).stdout == "mine\n"
        draws = [(await one_slot.run(plain)).stdout for _ in range(3)]
        assert len(set(draws)) == 3 and all(d.strip().isdigit() for d in draws), draws


async def test_a_sessions_module_of_its_own_is_the_one_imported(sandbox: AsyncSandbox) -> None:
    async with await sandbox.open_session("python") as s:
        await s.write_file("random.py", MINE)
        r = await s.exec("import random\nprint(random.randint(1, 2))")
        assert r.stdout == "mine\n", r.stderr


@pytest.mark.parametrize(
    ("source", "exit_code", "stdout", "stderr"),
    [
        ("raise SystemExit(-2**64)", 255, "", ""),  # (past a C long: Python's conversion gives -1)
        ("raise SystemExit(2**64 + 3)", 255, "", ""),
        ("import sys\nsys.stderr = None\nsys.exit('bye')", 1, "", "bye\n"),  # (C's stderr, not print's stdout)
        (
            "import sys\nout = sys.stdout.detach()\nout.write(b'answer 42\\n')",
            120,
            "answer 42\n",
            "Exception ignored in: <_io.TextIOWrapper mode='w' encoding='utf-8'>\n"
            "ValueError: underlying buffer has been detached\n",
        ),
        (
            "import sys\nclass W:\n    def write(self, s):\n        return len(s)\nsys.stdout = W()\nprint(1)",
            120,
            "",
            "Exception ignored in: <__main__.W object at 0x>\nAttributeError: 'W' object has no attribute 'flush'\n",
        ),
    ],
)
async def test_a_programs_way_out_ends_as_python3s(
    sandbox: AsyncSandbox, source: str, exit_code: int, stdout: str, stderr: str
) -> None:
    """Found by comparing fast runs with python3 (2026-12-07): a fast run had ended 0 (accepted) for
    ``SystemExit(-2**64)``, printed an exit message on stdout, and lost what was written to a
    detached stdout's buffer (python3 flushes it as it deallocates it, after failing to flush the
    detached ``sys.stdout``: status 120)."""
    r = await run(sandbox, source + "\n")
    printed = re.sub(r"at 0x[0-9a-f]+>", "at 0x>", r.stderr)
    assert (r.exit_code, r.stdout, printed) == (exit_code, stdout, stderr), r


async def test_a_program_recurses_as_deep_as_under_python3(sandbox: AsyncSandbox) -> None:
    """python3 3.11 runs a script's function 998 calls deep at the default limit, and finds its
    module at depth 2: a fast run's machinery below the program had cost it 7-11 levels (a depth-first
    search 990 deep failed here and passed there). A strict run's driver costs it 2 (documented)."""
    source = (
        "import sys\ndef f(n):\n    try:\n        return f(n + 1)\n    except RecursionError:\n        return n\n"
        "print(f(0))\ntry:\n    sys.setrecursionlimit(1)\nexcept RecursionError as e:\n    print(e)\n"
    )
    r = await run(sandbox, source)
    depth, message = r.stdout.splitlines()
    below = 2 if sandbox.isolation == "strict" else 0
    assert int(depth) == 998 - below, r.stderr
    assert message == f"cannot set the recursion limit to 1 at the recursion depth {2 + below}: the limit is too low"


async def test_a_programs_own_threading_does_not_keep_its_exit_handlers_from_running(sandbox: AsyncSandbox) -> None:
    """Its ``threading.py`` is what ``import threading`` finds: the run's end waited for threads through
    it, failed, and skipped the exit handlers with it (review, 2026-12-07); python3 runs them."""
    files = [InputFile(path="threading.py", content=b"MINE = 1\n")]
    source = "import atexit, threading\natexit.register(print, 'handler ran')\nprint(threading.MINE)\n"
    r = await sandbox.run(Program(language="python", source=source, files=files))
    assert r.stdout == "1\nhandler ran\n", r.stderr
