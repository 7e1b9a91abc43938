"""Sessions in the library: state and files persist; limits end the interpreter, not the files."""

from __future__ import annotations

import pytest

from dojo.sandbox import AsyncSandbox, LimitKind, Limits, SandboxError, Verdict


async def test_python_state_persists_and_survives_exceptions(fast_sandbox: AsyncSandbox) -> None:
    async with await fast_sandbox.open_session("python") as s:
        first = await s.exec("import collections\ncounts = collections.Counter('abca')")
        assert first.verdict is Verdict.ACCEPTED and first.session_restarted
        assert (await s.exec("counts['a']")).stdout == "2\n"
        boom = await s.exec("1 / 0")
        assert boom.verdict is Verdict.RUNTIME_ERROR and "ZeroDivisionError" in boom.stderr
        again = await s.exec("print(counts.most_common(1))")
        assert again.stdout == "[('a', 2)]\n" and not again.session_restarted


async def test_a_cell_runs_as_python_runs_it(fast_sandbox: AsyncSandbox) -> None:
    """A cell's traceback starts at the cell (a syntax error's too: no frame of the loop that parses
    it), and its annotations are Python's, not the loop's ``from __future__ import annotations``."""
    async with await fast_sandbox.open_session("python") as s:
        bad = await s.exec("x = 1\ndef f(:\n    pass")
        assert bad.stderr == '  File "<exec 1>", line 2\n    def f(:\n          ^\nSyntaxError: invalid syntax\n'
        raised = await s.exec("def g(d):\n    return d['k']\ng({})")
        assert raised.stderr == (
            'Traceback (most recent call last):\n  File "<exec 2>", line 3, in <module>\n'
            "  File \"<exec 2>\", line 2, in g\nKeyError: 'k'\n"
        )
        typed = await s.exec("def h(x: int) -> str:\n    return ''\nh.__annotations__")
        assert typed.stdout == "{'x': <class 'int'>, 'return': <class 'str'>}\n"
        # a cell that breaks its own stderr fails alone: the interpreter and its state go on
        gone = await s.exec("import sys\nkept = sys.stderr\ndel sys.stderr\n1 / 0")
        none = await s.exec("sys.stderr = None\n1 / 0")
        assert gone.verdict is none.verdict is Verdict.RUNTIME_ERROR and not (gone.session_ended or none.session_ended)
        assert gone.stderr.endswith("lost sys.stderr\n") and none.stderr == "" and none.stdout == ""
        back = await s.exec("sys.stderr = kept\nprint('alive')\n1 / 0")
        assert back.stdout == "alive\n" and back.stderr.endswith("ZeroDivisionError: division by zero\n")
        assert not back.session_restarted
        hooked = await s.exec("sys.excepthook = lambda t, v, tb: print('hooked', v)\n1 / 0")
        assert hooked.stdout == "hooked division by zero\n" and hooked.stderr == "" and not hooked.session_ended
        ended = await s.exec("def h(t, v, tb):\n    raise SystemExit(5)\nsys.excepthook = h\n1 / 0")
        assert ended.session_ended and ended.exit_code == 5


async def test_stdin_per_exec(fast_sandbox: AsyncSandbox) -> None:
    async with await fast_sandbox.open_session("python") as s:
        assert (await s.exec("print(input().upper())", stdin="hi\n")).stdout == "HI\n"
        assert (await s.exec("import sys\nprint(len(sys.stdin.read()))", stdin="abc")).stdout == "3\n"


async def test_limits_end_the_interpreter_but_keep_files(fast_sandbox: AsyncSandbox) -> None:
    async with await fast_sandbox.open_session("python", Limits(memory=128 << 20)) as s:
        await s.exec("open('kept.txt', 'w').write('still here')\nx = 1")
        hog = await s.exec("b = bytearray(512 << 20)")
        assert hog.verdict is Verdict.MEMORY_LIMIT_EXCEEDED and hog.session_ended
        loop = await s.exec("while True: pass", limits=Limits(cpu_time=0.5, wall_time=5))
        assert loop.verdict is Verdict.TIME_LIMIT_EXCEEDED and loop.limit is LimitKind.CPU_TIME
        after = await s.exec("print(open('kept.txt').read())\nprint('x' in globals())")
        assert after.stdout == "still here\nFalse\n" and after.session_restarted


async def test_exit_ends_the_interpreter(fast_sandbox: AsyncSandbox) -> None:
    async with await fast_sandbox.open_session("python") as s:
        r = await s.exec("import sys\nsys.exit(4)")
        assert r.verdict is Verdict.RUNTIME_ERROR and r.exit_code == 4 and r.session_ended


async def test_bash_session_keeps_cwd_and_files(fast_sandbox: AsyncSandbox) -> None:
    async with await fast_sandbox.open_session("bash") as s:
        await s.exec("mkdir -p a/b && cd a/b && echo 1 > one")
        r = await s.exec("pwd && ls")
        assert r.stdout == "/box/a/b\none\n"


async def test_files_in_and_out_as_the_session_user(fast_sandbox: AsyncSandbox) -> None:
    async with await fast_sandbox.open_session("python") as s:
        await s.write_file("in/data.bin", b"\x00\xffdata")
        r = await s.exec("d = open('in/data.bin', 'rb').read()\nopen('out.txt', 'w').write(str(len(d)))")
        assert r.verdict is Verdict.ACCEPTED
        assert await s.read_file("out.txt") == b"6"
        with pytest.raises(FileNotFoundError):
            await s.read_file("missing.txt")
        # a symlink the program plants does not let the session's file API reach root-only files
        await s.exec("import os\nos.symlink('/etc/shadow', 'shadow')")
        with pytest.raises(FileNotFoundError):
            await s.read_file("shadow")


async def test_sessions_are_isolated_from_each_other(fast_sandbox: AsyncSandbox) -> None:
    async with await fast_sandbox.open_session("python") as a, await fast_sandbox.open_session("python") as b:
        await a.exec("open('/tmp/secret', 'w').write('a')\nsecret = 'a'")
        r = await b.exec("import os\nprint(os.path.exists('/tmp/secret'), 'secret' in globals())")
        assert r.stdout == "False False\n"


async def test_closed_session_refuses_work(fast_sandbox: AsyncSandbox) -> None:
    s = await fast_sandbox.open_session("python")
    await s.close()
    with pytest.raises(SandboxError, match="closed"):
        await s.exec("1")
