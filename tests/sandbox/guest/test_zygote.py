"""The zygote's run path: the spare (``AsyncSandbox(spare=True)``: the next run's process, forked
while the slot is idle)."""

from __future__ import annotations

from typing import Any

from dojo.sandbox import AsyncSandbox, Limits, Program, Verdict
from dojo.sandbox.languages import get_language
from dojo.sandbox.runtime import build_request
from tests.sandbox.conftest import MODE, root_only


async def raw_run(sandbox: AsyncSandbox, program: Program) -> dict[str, Any]:
    """The zygote's own reply to a request (its timings say how the run's process was made)."""
    header, blobs, timeout = build_request(
        program, get_language(program.language), Limits(), Limits(), sandbox.python, strict=False
    )
    resp, _ = await sandbox.pool.execute(header, blobs, timeout)
    return resp


async def test_runs_are_served_by_a_process_forked_before_their_request(spare_slot: AsyncSandbox) -> None:
    made = []
    for source in ("print(1)", "import sys; sys.exit(3)", "print(2)"):
        resp = await raw_run(spare_slot, Program(language="python", source=source))
        made.append("spare" if "spare" in resp["timings_us"] else "fork" if "fork" in resp["timings_us"] else "?")
    assert made == ["spare", "spare", "spare"]
    resp = await raw_run(spare_slot, Program(language="bash", source="exit 4"))  # an exec'd program too
    assert "spare" in resp["timings_us"] and resp["steps"][0]["exit_code"] == 4


async def test_without_a_spare_each_run_is_forked_on_request(one_slot: AsyncSandbox) -> None:
    resp = await raw_run(one_slot, Program(language="python", source="print(1)"))
    assert "fork" in resp["timings_us"] and "spare" not in resp["timings_us"]


@root_only
async def test_a_run_whose_spare_was_killed_is_forked_afresh(spare_slot: AsyncSandbox) -> None:
    """A spare that died while idle (anything killed it) costs nothing but the fork it saved."""
    import asyncio
    import os
    from pathlib import Path

    slot = spare_slot.pool.slots()[0]
    assert slot.pid is not None
    zygote = int(Path(f"/proc/{slot.pid}/task/{slot.pid}/children").read_text().split()[0])
    spares: list[str] = []
    for _ in range(200):  # the spare is forked once the slot is idle, a moment after it said ready
        spares = Path(f"/proc/{zygote}/task/{zygote}/children").read_text().split()
        if spares:
            break
        await asyncio.sleep(0.05)
    assert len(spares) == 1  # the idle slot holds exactly one spare
    os.kill(int(spares[0]), 9)
    stat = Path(f"/proc/{spares[0]}/stat")
    for _ in range(200):  # dead (a zombie the zygote has not reaped yet, or gone): its pipes are closed
        try:
            if stat.read_text().rsplit(")", 1)[1].split()[0] == "Z":
                break
        except (FileNotFoundError, ProcessLookupError):
            break
        await asyncio.sleep(0.01)
    resp = await raw_run(spare_slot, Program(language="python", source="print('after')"))
    assert "fork" in resp["timings_us"] and resp["steps"][0]["exit_code"] == 0
    resp = await raw_run(spare_slot, Program(language="python", source="print('again')"))
    assert "spare" in resp["timings_us"] and resp["steps"][0]["exit_code"] == 0


SIGNAL_THE_ZYGOTE = """
import os, signal, time
for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGKILL):
    try:
        os.kill(1, sig)
        print("sent", sig.name)
    except PermissionError:
        pass
try:
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(5)
except KeyboardInterrupt:
    print("interrupted")
"""


async def test_a_run_that_signals_the_zygote_does_not_end_the_slot(one_slot: AsyncSandbox) -> None:
    """The zygote is PID 1 of the slot: the kernel drops what its namespace sends it without a handler,
    and it keeps none (Python's SIGINT handler made a rootless run's ``kill(1, SIGINT)`` end the slot:
    an infrastructure error instead of the run's verdict). A run still gets Python's SIGINT handler."""
    first = await one_slot.run(Program(language="python", source=SIGNAL_THE_ZYGOTE))
    sent = "".join(f"sent {name}\n" for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGUSR1", "SIGKILL"))
    expected = (sent if MODE == "rootless" else "") + "interrupted\n"  # root mode: another uid, EPERM
    assert first.verdict is Verdict.ACCEPTED and first.stdout == expected, first
    second = await one_slot.run(Program(language="python", source="print(2)"))
    assert second.verdict is Verdict.ACCEPTED and second.stdout == "2\n", second
