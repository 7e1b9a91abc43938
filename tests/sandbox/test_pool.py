"""The pool under load and under faults: concurrency, dead slots, and nothing left behind."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import tempfile
from pathlib import Path

from dojo.sandbox import AsyncSandbox, Program, Verdict
from tests.sandbox.conftest import requires_isolation, root_only


async def test_64_runs_at_once_all_outputs_correct(sandbox: AsyncSandbox) -> None:
    programs = [
        Program(
            language="python",
            source=f"import sys\nprint({i} * 7, sys.stdin.read())",
            stdin=f"in{i}",
        )
        for i in range(64)
    ]
    results = await sandbox.run_many(programs)
    for i, r in enumerate(results):
        assert r.verdict is Verdict.ACCEPTED, r
        assert r.stdout == f"{i * 7} in{i}\n"


def _zygote_of(holder_pid: int) -> int:
    children = Path(f"/proc/{holder_pid}/task/{holder_pid}/children").read_text().split()
    return int(children[0])


async def test_killed_slot_is_replaced_and_the_run_reports_sandbox_error(
    one_slot: AsyncSandbox,
) -> None:
    pool = one_slot.pool
    (slot,) = pool.slots()
    assert slot.pid is not None
    zygote = _zygote_of(slot.pid)
    task = asyncio.create_task(
        one_slot.run(Program(language="python", source="import time\ntime.sleep(5)\nprint('x')"))
    )
    await asyncio.sleep(0.5)
    os.kill(zygote, signal.SIGKILL)
    r = await task
    assert r.verdict is Verdict.SANDBOX_ERROR
    assert r.sandbox_error and "died" in r.sandbox_error
    after = await one_slot.run(Program(language="python", source="print('replaced')"))
    assert after.verdict is Verdict.ACCEPTED and after.stdout == "replaced\n"
    assert pool.restarts == 1
    (new_slot,) = pool.slots()
    assert new_slot.pid != slot.pid


def _descendants() -> set[str]:
    """This test process's descendants (orphans come back to it: tests/conftest.py makes it a subreaper)."""
    parent: dict[str, str] = {}
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                stat = Path(f"/proc/{p}/stat").read_bytes()
            except OSError:
                continue
            parent[p] = stat[stat.rfind(b")") + 2 :].split()[1].decode()
    found: set[str] = set()
    frontier = {str(os.getpid())}
    while frontier:
        frontier = {p for p, pp in parent.items() if pp in frontier} - found
        found |= frontier
    return found


def _snapshot() -> dict[str, set[str]]:
    """What this process's pools leave on the machine (only its own: other test workers run pools too)."""
    mounts = set(Path("/proc/self/mountinfo").read_text().splitlines())
    cgroups: set[str] = set()
    from dojo.sandbox.cgroups import detect

    for root in {*detect().parents.values(), *(Path("/sys/fs/cgroup") / c for c in ("memory", "pids", "unified"))}:
        if Path(root).is_dir():  # where this machine's pools are made (v1: per controller; v2: one tree)
            for top, dirs, _ in os.walk(root):  # (a group that goes while it is read is skipped)
                cgroups |= {os.path.join(top, d) for d in dirs if d.startswith(f"dojo-{os.getpid()}-")}
    procs = set()
    for p in _descendants():
        try:
            cmd = Path(f"/proc/{p}/cmdline").read_bytes()
        except OSError:
            continue
        if b"zygote" in cmd or b"unshare" in cmd or b"sleep\x00100" in cmd:
            procs.add(p)
    tmp = {str(p) for p in Path(tempfile.gettempdir()).iterdir()}
    return {"mounts": mounts, "cgroups": cgroups, "procs": procs, "tmp": tmp}


async def test_1000_runs_leave_nothing_behind() -> None:
    from tests.sandbox.conftest import SKIP_REASON

    if SKIP_REASON:
        import pytest

        pytest.skip(SKIP_REASON)
    before = _snapshot()
    sb = AsyncSandbox(pool_size=4)
    async with sb:
        sem = asyncio.Semaphore(16)
        background = "import subprocess\nsubprocess.Popen(['sleep', '100'], start_new_session=True)\nprint({i})"

        async def one(i: int) -> bool:
            async with sem:
                src = background.format(i=i) if i % 50 == 0 else f"open('/tmp/f{i}', 'w').write('x')\nprint({i})"
                r = await sb.run(Program(language="python", source=src))
                return r.verdict is Verdict.ACCEPTED and r.stdout == f"{i}\n"

        oks = await asyncio.gather(*(one(i) for i in range(1000)))
        assert all(oks)
        during = _snapshot()
        if sb.pool.cgroups is not None:  # the pool's groups exist while it runs
            assert len(during["cgroups"] - before["cgroups"]) > 0
    after = _snapshot()
    assert after["procs"] - before["procs"] == set()
    assert after["cgroups"] - before["cgroups"] == set()
    assert after["mounts"] - before["mounts"] == set()
    assert after["tmp"] - before["tmp"] == set()


@root_only
def test_groups_of_a_killed_dojo_process_are_swept_at_start() -> None:
    from dojo.sandbox.cgroups import SlotCgroups, detect
    from tests.sandbox.conftest import SKIP_REASON

    if SKIP_REASON:
        import pytest

        pytest.skip(SKIP_REASON)
    layout = detect()
    dead = 4_000_000  # above pid_max: no process has it
    stale = SlotCgroups(layout, name=f"dojo-{dead}-deadbeef")
    stale.create_pool()
    stale.create_slot("slot-0")
    dirs = list(stale.pool_dirs.values())
    assert all(d.is_dir() for d in dirs)
    fresh = SlotCgroups(layout)
    fresh.create_pool()
    try:
        assert not any(d.exists() for d in dirs)
    finally:
        fresh.remove_pool()


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


@requires_isolation
async def test_a_cancelled_close_still_stops_every_slot() -> None:
    """The caller of close may be cancelled (a test that timed out, a server told to stop twice): the
    slots are stopped all the same (they were left running when the cancel hit the kills)."""
    sb = AsyncSandbox(pool_size=2)
    await sb.start()
    pids = [slot.pid for slot in sb.pool._slots.values()]
    assert all(pid is not None and _running(pid) for pid in pids)
    closing = asyncio.ensure_future(sb.close())
    await asyncio.sleep(0)  # the close has begun: its kills are about to start
    closing.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await closing
    async with asyncio.timeout(20):
        while any(pid is not None and _running(pid) for pid in pids):
            await asyncio.sleep(0.05)
    assert not sb.started
