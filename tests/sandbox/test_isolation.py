"""Isolation: no network, no host files, no host processes, nothing shared between runs."""

from __future__ import annotations

import socket
import threading

import pytest

from dojo.sandbox import AsyncSandbox, Limits, Program, Verdict
from tests.sandbox.conftest import root_only, rootless_only


@pytest.fixture
def host_server() -> tuple[int, list[str]]:
    """A TCP server on the host's 127.0.0.1 that records every connection it accepts."""
    accepted: list[str] = []
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    srv.settimeout(0.2)
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            try:
                conn, addr = srv.accept()
            except OSError:
                continue
            accepted.append(str(addr))
            conn.sendall(b"host-secret\n")
            conn.close()

    t = threading.Thread(target=loop, daemon=True)
    t.start()
    yield srv.getsockname()[1], accepted  # type: ignore[misc]
    stop.set()
    t.join()
    srv.close()


CONNECT = """
import socket, sys
try:
    s = socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=2)
    print('connected', s.recv(100))
except OSError as e:
    print('refused', type(e).__name__)
"""


async def test_host_loopback_is_unreachable(sandbox: AsyncSandbox, host_server: tuple[int, list[str]]) -> None:
    port, accepted = host_server
    r = await sandbox.run(Program(language="python", source=CONNECT, args=[str(port)]))
    assert r.stdout.startswith("refused"), r
    assert accepted == []


@root_only
async def test_network_flag_opens_the_host_network(sandbox: AsyncSandbox, host_server: tuple[int, list[str]]) -> None:
    port, accepted = host_server
    r = await sandbox.run(Program(language="python", source=CONNECT, args=[str(port)]), Limits(network=True))
    assert "host-secret" in r.stdout, r
    assert len(accepted) == 1


@rootless_only
async def test_rootless_refuses_the_network_flag_and_says_why(sandbox: AsyncSandbox) -> None:
    with pytest.raises(ValueError, match="network needs the sandbox to run as root"):
        await sandbox.run(Program(language="python", source="print(1)"), Limits(network=True))


@rootless_only
async def test_rootless_run_has_no_capabilities_and_an_unmapped_uid(sandbox: AsyncSandbox) -> None:
    src = (
        "import os\ncaps = [l.split()[1] for l in open('/proc/self/status') if l.startswith('Cap')]\n"
        "print(os.getuid(), set(caps))\n"
        "try:\n    os.setuid(0)\nexcept OSError as e:\n    print('setuid refused', e.errno)\n"
    )
    r = await sandbox.run(Program(language="python", source=src))
    assert r.stdout == "1000 {'0000000000000000'}\nsetuid refused 22\n", r


async def test_host_files_are_read_only_and_private_dirs_absent(sandbox: AsyncSandbox) -> None:
    src = """
import os
for path in ['/etc/passwd', '/usr/bin/dojo-owned', '/newfile']:
    try:
        open(path, 'a').write('x')
        print('WROTE', path)
    except OSError as e:
        print('denied', path, e.errno)
for path in ['/root', '/home', '/work', '/var', '/sys', '/run']:
    print('exists' if os.path.exists(path) else 'absent', path)
print('uid', os.getuid(), 'euid', os.geteuid())
"""
    r = await sandbox.run(Program(language="python", source=src))
    assert "WROTE" not in r.stdout, r.stdout
    for path in ["/root", "/home", "/work", "/var", "/sys", "/run"]:
        assert f"absent {path}" in r.stdout
    uid = int(r.stdout.split("uid ")[1].split()[0])
    assert uid != 0


async def test_setuid_binaries_do_not_elevate(sandbox: AsyncSandbox) -> None:
    r = await sandbox.run(Program(language="bash", source="su -c id root </dev/null; mount -t tmpfs x /tmp; id -u\n"))
    assert r.stdout.strip().splitlines()[-1] != "0"


async def test_host_processes_are_invisible(sandbox: AsyncSandbox) -> None:
    src = "import os\nprint(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))\n"
    r = await sandbox.run(Program(language="python", source=src))
    pids = eval(r.stdout)  # a list of ints printed by the program
    assert len(pids) <= 3  # the zygote (PID 1), the run, and at most a helper


async def test_nothing_leaks_to_the_next_run(one_slot: AsyncSandbox) -> None:
    plant = """
import ctypes, os, subprocess
open('/box/planted', 'w').write('x')
open('/tmp/planted', 'w').write('x')
open('/dev/shm/planted', 'w').write('x')
libc = ctypes.CDLL(None, use_errno=True)
shmid = libc.shmget(0x5EED, 4096, 0o1000 | 0o666)  # IPC_CREAT
print('shm', shmid)
subprocess.Popen(['sleep', '1000'], start_new_session=True)
print('planted')
"""
    probe = """
import ctypes, os
print('files', [p for p in ['/box/planted', '/tmp/planted', '/dev/shm/planted'] if os.path.exists(p)])
libc = ctypes.CDLL(None, use_errno=True)
print('shm', libc.shmget(0x5EED, 0, 0))
procs = []
for p in os.listdir('/proc'):
    if p.isdigit():
        try:
            procs.append(open(f'/proc/{p}/cmdline', 'rb').read().split(b'\\0')[0].decode())
        except OSError:
            pass
print('sleepers', [c for c in procs if 'sleep' in c])
"""
    r1 = await one_slot.run(Program(language="python", source=plant))
    assert r1.verdict is Verdict.ACCEPTED, r1
    assert int(r1.stdout.split()[1]) >= 0  # the segment really was created
    r2 = await one_slot.run(Program(language="python", source=probe))
    lines = r2.stdout.splitlines()
    assert lines[0] == "files []"
    assert lines[1] == "shm -1"
    assert lines[2] == "sleepers []"


IPC_PLANTS = {
    "sysv shm": ("libc.shmget(0x5EED, 4096, 0o1000 | 0o666)", "libc.shmget(0x5EED, 0, 0)"),
    "sysv sem": ("libc.semget(0x5EED, 1, 0o1000 | 0o666)", "libc.semget(0x5EED, 0, 0)"),
    "sysv msg": ("libc.msgget(0x5EED, 0o1000 | 0o666)", "libc.msgget(0x5EED, 0)"),
    "posix mq": (
        "libc.mq_open(b'/planted', os.O_CREAT | os.O_RDWR, 0o600, None)",
        "libc.mq_open(b'/planted', os.O_RDWR)",
    ),
}


@pytest.mark.parametrize("kind", sorted(IPC_PLANTS))
async def test_ipc_objects_do_not_outlive_their_run(one_slot: AsyncSandbox, kind: str) -> None:
    plant, probe = IPC_PLANTS[kind]
    head = "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\nprint(os.readlink('/proc/self/ns/ipc'))\n"
    clean1 = await one_slot.run(Program(language="python", source=head))
    clean2 = await one_slot.run(Program(language="python", source=head))
    planted = await one_slot.run(Program(language="python", source=head + f"print({plant})\n"))
    after = await one_slot.run(Program(language="python", source=head + f"print({probe})\n"))
    assert int(planted.stdout.split()[1]) >= 0, planted  # the object really was made
    assert after.stdout.split()[1] == "-1", after  # and the next run cannot open it
    # A run that leaves nothing keeps the slot's IPC namespace (making one per run is slow); a run
    # that leaves something is followed by a fresh one.
    assert clean1.stdout == clean2.stdout == planted.stdout.splitlines()[0] + "\n"
    assert after.stdout.split()[0] != clean1.stdout.strip()


async def test_random_state_differs_between_runs(fast_sandbox: AsyncSandbox) -> None:
    src = "import random\nprint(random.random())\n"
    outs = {(await fast_sandbox.run(Program(language="python", source=src))).stdout for _ in range(5)}
    assert len(outs) == 5
