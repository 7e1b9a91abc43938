"""Sessions in the library: state and files persist; limits end the interpreter, not the files."""

from __future__ import annotations

import asyncio

import pytest

from dojo.sandbox import AsyncSandbox, LimitKind, Limits, SandboxError, Verdict
from dojo.sandbox.errors import FileRefused, SessionBusy


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
        # Python's own exit() and quit() (site's: the sandbox's interpreter runs without it)
        for call in ("exit(0)", "quit()"):
            r = await s.exec(f"x = 1\n{call}")
            assert r.verdict is Verdict.ACCEPTED and r.session_ended, (call, r.stderr)


async def test_a_file_left_open_is_written_out_when_the_interpreter_exits(fast_sandbox: AsyncSandbox) -> None:
    """As Python's exit flushes it; the session's worker holds two descriptors of its own besides
    the program's, so the end-of-run probe must look past them."""
    async with await fast_sandbox.open_session("python") as s:
        await s.exec("f = open('answer.txt', 'w')\nf.write('42')")
        r = await s.exec("exit(0)")
        assert r.session_ended, r
        assert await s.read_file("answer.txt") == b"42"


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
        # nor the zygote's own /proc/self (its descriptors, its command line): /box, /tmp, /dev/shm only
        await s.exec("os.symlink('/proc/self/cmdline', 'cmd')\nos.symlink('/proc/self/fd/12', 'fd')")
        with pytest.raises(FileNotFoundError, match="not a file the run wrote"):
            await s.read_file("cmd")
        with pytest.raises(FileNotFoundError):  # (not a file the run wrote, or not a regular one)
            await s.read_file("fd")
        await s.exec("open('/tmp/t', 'w').write('t')\nos.symlink('/tmp/t', 't')")
        assert await s.read_file("t") == b"t"


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


@pytest.mark.parametrize(
    ("plant", "path", "found"),
    [
        ("os.mkfifo('out.txt')", "out.txt", "a FIFO"),
        # a FIFO with a reader waiting: its open would not block, what it is still refuses it
        ("os.mkfifo('out.txt')\nthreading.Thread(target=lambda: open('out.txt').read(), daemon=True).start()",
         "out.txt", "a FIFO"),
        ("os.symlink('/etc/passwd', 'out.txt')", "out.txt", "a symlink"),
        ("os.symlink('keep.txt', 'out.txt')", "out.txt", "a symlink"),
        ("os.mkdir('out.txt')", "out.txt", "a directory"),
        ("held = socket.socket(socket.AF_UNIX)\nheld.bind('out.txt')", "out.txt", "a socket"),
        ("os.symlink('/tmp', 'sub')", "sub/out.txt", "'sub' is a symlink, not a directory"),
        ("os.mkfifo('sub')", "sub/out.txt", "'sub' is a FIFO"),
    ],
)  # fmt: skip
async def test_write_file_refuses_what_the_code_left_at_the_path(
    fast_sandbox: AsyncSandbox, plant: str, path: str, found: str
) -> None:
    """A session's work dir is its code's: a write_file never waits on a FIFO (the slot would stop
    answering and be killed, the session with it) nor writes through a symlink; it is refused, and
    the session goes on: its files, its interpreter's state."""
    async with await fast_sandbox.open_session("python") as s:
        await s.write_file("keep.txt", b"important work")
        made = await s.exec(f"import os, socket, threading\nx = 41\n{plant}")
        assert made.verdict is Verdict.ACCEPTED, made.stderr
        with pytest.raises(FileRefused, match=found):
            await asyncio.wait_for(s.write_file(path, b"new"), 20)
        assert s.alive
        assert await asyncio.wait_for(s.read_file("keep.txt"), 20) == b"important work"
        after = await asyncio.wait_for(s.exec("print(x + 1)"), 20)
        assert after.stdout == "42\n" and not after.session_restarted
        await s.write_file("other/new.txt", b"ok")  # and writes elsewhere as before
        assert await s.read_file("other/new.txt") == b"ok"


async def test_an_execs_own_file_replaces_what_the_code_left_there(fast_sandbox: AsyncSandbox) -> None:
    """bash runs from main.sh, written anew each exec: a FIFO or a symlink the code left at that
    name is replaced (a symlink's target is not written through), so the session goes on."""
    async with await fast_sandbox.open_session("bash") as s:
        await s.write_file("keep.txt", b"important work")
        assert (await s.exec("rm main.sh && mkfifo main.sh && echo made")).stdout == "made\n"
        again = await asyncio.wait_for(s.exec("echo again; [ -f main.sh ] && echo regular"), 20)
        assert again.stdout == "again\nregular\n"
        await s.exec("rm main.sh && ln -s keep.txt main.sh")
        assert (await asyncio.wait_for(s.exec("echo still"), 20)).stdout == "still\n"
        assert await s.read_file("keep.txt") == b"important work"
        await s.exec("rm main.sh && mkdir main.sh")  # a directory is not removed for it: refused
        with pytest.raises(FileRefused, match=r"'main\.sh' is a directory, not a regular file"):
            await asyncio.wait_for(s.exec("echo never"), 20)
        assert s.alive and await s.read_file("keep.txt") == b"important work"


async def test_a_busy_session_refuses_another_request(fast_sandbox: AsyncSandbox) -> None:
    async with await fast_sandbox.open_session("python") as s:
        slow = asyncio.create_task(s.exec("import time\ntime.sleep(1.5)\nprint('slept')"))
        try:
            deadline = asyncio.get_running_loop().time() + 20
            while not s.busy and asyncio.get_running_loop().time() < deadline:
                await asyncio.sleep(0.01)
            calls = (lambda: s.exec("1"), lambda: s.write_file("f.txt", b"x"), lambda: s.read_file("f.txt"))
            for call in calls:
                with pytest.raises(SessionBusy, match="busy with another request"):
                    await call()
        finally:
            slept = await asyncio.wait_for(slow, 30)
        assert slept.stdout == "slept\n"
        assert (await s.exec("print('free')")).stdout == "free\n"


async def test_a_write_when_the_sessions_processes_fill_its_limit_is_refused_and_ends_nothing(
    fast_sandbox: AsyncSandbox,
) -> None:
    # the zygote's fork for the write failed (EAGAIN), and the failed request reaped the session:
    # its interpreter's state and its processes were gone
    async with await fast_sandbox.open_session("python", Limits(processes=16)) as s:
        fill = "import os, time\nx = 41\nfor _ in range(16):\n    try:\n        pid = os.fork()\n" \
               "    except BlockingIOError:\n        break\n    if pid == 0:\n        os.setsid()\n" \
               "        time.sleep(30)\n        os._exit(0)\n"  # fmt: skip
        assert (await s.exec(fill)).verdict is Verdict.ACCEPTED
        try:
            await s.write_file("a.txt", b"x")
            refused = False
        except FileRefused as e:
            assert "processes are at its limit" in str(e)
            refused = True
        assert refused or fast_sandbox.mode == "rootless"  # (rootless: the zygote's fork is not under the limit)
        assert (await s.exec("print(x + 1)")).stdout == "42\n"
