"""Limits that bite: fork bombs, floods, disk fill, descriptors, file size."""

from __future__ import annotations

import pytest

from dojo.sandbox import AsyncSandbox, Limits, Program, Verdict

FORK_COUNTER = """
import os, time
count = 0
children = []
try:
    for _ in range(10000):
        pid = os.fork()
        if pid == 0:
            time.sleep(30)
            os._exit(0)
        children.append(pid)
        count += 1
except OSError as e:
    print("stopped", count, e.errno)
"""


async def test_process_limit_stops_forks(sandbox: AsyncSandbox) -> None:
    r = await sandbox.run(Program(language="python", source=FORK_COUNTER), Limits(processes=16, wall_time=10))
    assert r.verdict is Verdict.ACCEPTED, r
    words = r.stdout.split()
    assert words[0] == "stopped"
    assert int(words[1]) < 16  # the program itself counts as one


async def test_fork_bomb_is_contained_and_the_next_run_works(sandbox: AsyncSandbox) -> None:
    bomb = Program(language="bash", source=":(){ :|:& };:\nsleep 10\n")
    r = await sandbox.run(bomb, Limits(processes=32, wall_time=1.5))
    assert r.verdict is Verdict.TIME_LIMIT_EXCEEDED
    after = await sandbox.run(Program(language="python", source="print('alive')"))
    assert after.verdict is Verdict.ACCEPTED and after.stdout == "alive\n"


async def test_output_flood_of_100_mb_on_stderr(sandbox: AsyncSandbox) -> None:
    src = "import os\nchunk = b'e' * (1 << 20)\nfor _ in range(100):\n    os.write(2, chunk)\n"
    r = await sandbox.run(Program(language="python", source=src), Limits(output=1 << 20))
    assert r.verdict is Verdict.OUTPUT_LIMIT_EXCEEDED
    assert r.stderr_truncated and len(r.stderr) == 1 << 20


async def test_disk_fill_stops_at_the_scratch_size(sandbox: AsyncSandbox) -> None:
    src = """
import errno
written = 0
try:
    with open('fill', 'wb') as f:
        while True:
            f.write(b'\\0' * 65536)
            f.flush()
            written += 65536
except OSError as e:
    print(errno.errorcode[e.errno], written)
"""
    r = await sandbox.run(Program(language="python", source=src), Limits(disk=8 << 20, file_size=1 << 30))
    code, written = r.stdout.split()
    assert code == "ENOSPC"
    assert int(written) <= 8 << 20


async def test_file_size_limit(sandbox: AsyncSandbox) -> None:
    src = "with open('big', 'wb') as f:\n    f.write(b'x' * (4 << 20))\n"
    r = await sandbox.run(Program(language="python", source=src), Limits(file_size=1 << 20))
    assert r.verdict is Verdict.RUNTIME_ERROR
    assert "File too large" in r.stderr


async def test_file_size_limit_in_c_is_reported_as_that_limit(sandbox: AsyncSandbox) -> None:
    src = (
        "#include <stdio.h>\nstatic char buf[1024];\n"
        'int main(void){FILE*f=fopen("big","wb");for(int i=0;i<4096;i++){fwrite(buf,1,1024,f);fflush(f);}return 0;}\n'
    )
    r = await sandbox.run(Program(language="c", source=src), Limits(file_size=1 << 20))
    assert r.verdict is Verdict.RUNTIME_ERROR
    assert r.limit == "file_size" and r.signal == 25


async def test_too_many_open_files(sandbox: AsyncSandbox) -> None:
    src = """
files = []
try:
    while True:
        files.append(open('/dev/null'))
except OSError as e:
    print(e.errno, len(files))
"""
    r = await sandbox.run(Program(language="python", source=src), Limits(open_files=32))
    err, count = r.stdout.split()
    assert err == "24"  # EMFILE
    assert int(count) <= 32


async def test_limits_reject_bad_values() -> None:
    import pytest
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="greater than"):
        Limits(wall_time=-1)
    with pytest.raises(ValidationError, match="memory"):
        Limits(memory=0)
    with pytest.raises(ValidationError, match="Extra inputs"):
        Limits(walltime=1)  # type: ignore[call-arg]


IPC_FILLS = {  # (SysV objects outlive their processes, charged to the slot's memory group)
    "shared memory": (  # (left attached: a detached one goes at once, ``shm_rmid_forced``)
        "libc.shmat.restype = ctypes.c_void_p\n"
        "libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]\n"
        "while (sid := libc.shmget(0, 8 << 20, 0o1600)) >= 0:  # never removed\n"
        "    ctypes.memset(libc.shmat(sid, None, 0), 1, 8 << 20)\n"
    ),
    "message queues": (
        "message = ctypes.create_string_buffer(8 + 8192)\n"
        "ctypes.c_long.from_buffer(message).value = 1\n"
        "while (queue := libc.msgget(0, 0o1600)) >= 0:\n"
        "    while libc.msgsnd(queue, message, 8192, 0o4000) == 0:  # IPC_NOWAIT\n"
        "        pass\n"
    ),
}


@pytest.mark.parametrize("fill", list(IPC_FILLS))
async def test_what_a_runs_ipc_objects_hold_is_freed_before_its_files_are_fetched(
    sandbox: AsyncSandbox, fill: str
) -> None:
    """A run writes a 15 MiB file to be fetched, then fills SysV objects to its memory limit. They
    outlived it, charged to the slot's memory group, so the zygote had no memory left to read the
    file with: the slot died, and a grader's wrong answer (reward 0) became an infrastructure error
    (None). The objects are removed once the run's processes are gone."""
    source = "import ctypes\nopen('big.txt', 'w').write('x' * (15 << 20))\nlibc = ctypes.CDLL(None)\n" + IPC_FILLS[fill]
    limits = Limits(memory=256 << 20, wall_time=20, cpu_time=20, file_size=32 << 20)
    r = await sandbox.run(Program(language="python", source=source, fetch=["big.txt"]), limits)
    assert r.verdict is not Verdict.SANDBOX_ERROR, r.sandbox_error
    assert len(r.files["big.txt"].content) == 15 << 20, r
    again = await sandbox.run(Program(language="python", source="print('next')"))
    assert again.stdout == "next\n", again
