"""What a test leaves behind: threads, processes, slot pools, listening sockets and temporary entries.

``tests/conftest.py`` takes a ``Snapshot`` before each test and compares it with what is there after
the test's own fixtures were torn down; whatever is new and still there after a grace period is a leak,
named in the failure. The test process is made a child subreaper, so a process that a test's code
double-forked away still comes back to us (as a child) and is seen.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import tempfile
import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import Any

PR_SET_CHILD_SUBREAPER = 36
GRACE_S = 3.0  # a thread joining, a server closing or a process exiting after its owner let go

# Threads that live as long as the test process by design, each with its reason; matched by prefix.
LIFELONG_THREADS = {
    "asyncio-session": "the session event loop's default executor (tests/conftest.py starts all of it first)",
    "pydevd": "a debugger",
    "ray_": "Ray's driver threads live until ray.shutdown; the Ray tests' session fixture shuts it down",
    "tqdm_monitor": "tqdm's one monitor thread per process, started by the first progress bar",
    "fsspecIO": "fsspec's one event-loop thread per process for its async filesystems (s3fs), and that loop's "
    "executor (named so by tests/rollout/test_object_store.py)",
}
# Entries of the temporary directory made by libraries once per process or machine, not per test.
LIFELONG_TEMP = {
    "pytest-of-": "pytest's own base temporary directory (tmp_path lives there)",
    "ray": "Ray's session directory (Ray keeps its logs there after shutdown)",
    "torchinductor_": "torch's compile cache",
    "tmp_dojo_verl": "verl's cache",
}


def become_subreaper() -> bool:
    """Orphans of our descendants come back to this process instead of to init (Linux >= 3.4)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def _stat(pid: int) -> tuple[int, str] | None:
    """(parent pid, state letter) of ``pid``; None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    rest = data[data.rfind(b")") + 2 :].split()
    return int(rest[1]), rest[0].decode()


def children() -> dict[int, str]:
    """This process's children: pid -> state (``Z`` for a zombie)."""
    me = os.getpid()
    out: dict[int, str] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = _stat(int(name))
            if st is not None and st[0] == me:
                out[int(name)] = st[1]
    return out


def describe_process(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
    except OSError:
        return f"pid {pid} (gone)"
    text = " ".join(a.decode(errors="replace") for a in argv if a)
    return f"pid {pid}: {text[:160]}"


def reap_zombies(owned: set[int]) -> None:
    """Reap our children that died unreaped, but for ``owned`` ones (a live owner's: a pool's slot, a
    process of before the test, whose owner reaps it and reads its status: reaped here, a ``Popen``
    would read 0 and libuv would wait for it forever). The rest are orphans handed to us as
    subreaper, or processes of a test that is over: nobody else will reap them."""
    for pid, state in children().items():
        if state == "Z" and pid not in owned:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)


def listening_sockets() -> dict[int, str]:
    """This process's listening TCP sockets: inode -> "address:port"."""
    inodes: set[int] = set()
    with contextlib.suppress(OSError):
        for fd in os.listdir("/proc/self/fd"):
            with contextlib.suppress(OSError):
                target = os.readlink(f"/proc/self/fd/{fd}")
                if target.startswith("socket:["):
                    inodes.add(int(target[8:-1]))
    out: dict[int, str] = {}
    for table in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as f:
            for line in f.readlines()[1:]:
                cols = line.split()
                if cols[3] == "0A" and int(cols[9]) in inodes:  # 0A: LISTEN
                    port = int(cols[1].rsplit(":", 1)[1], 16)
                    out[int(cols[9])] = f"port {port}"
    return out


def temp_entries() -> set[str]:
    try:
        names = os.listdir(tempfile.gettempdir())
    except OSError:
        return set()
    return {n for n in names if not n.startswith(tuple(LIFELONG_TEMP))}


class PoolRegistry:
    """Every ``SlotPool`` and ``AsyncSandbox`` made in this process (weakly), so a check can tell a
    pool's slots from a leak, and what a sandbox that outlives the test (a session fixture's) started
    lazily during it (an environment's pool, the package proxy) from what the test itself left open."""

    def __init__(self) -> None:
        self.pools: weakref.WeakSet[Any] = weakref.WeakSet()
        self.sandboxes: weakref.WeakSet[Any] = weakref.WeakSet()

    def install(self) -> None:
        from dojo.sandbox.pool import SlotPool
        from dojo.sandbox.runtime import AsyncSandbox

        self._track(SlotPool, self.pools)
        self._track(AsyncSandbox, self.sandboxes)

    @staticmethod
    def _track(cls: Any, into: weakref.WeakSet[Any]) -> None:
        original = cls.__init__

        def tracked_init(obj: Any, *args: Any, **kwargs: Any) -> None:
            original(obj, *args, **kwargs)
            into.add(obj)

        cls.__init__ = tracked_init

    def open_pools(self) -> set[int]:
        return {id(p) for p in list(self.pools) if not p._closed}

    def open_sandboxes(self) -> set[int]:
        return {id(s) for s in list(self.sandboxes) if s.started}

    def owned_by(self, sandbox_ids: set[int]) -> tuple[set[int], set[str]]:
        """The pools (ids) and listening sockets ("port N") of the given sandboxes, while still open."""
        pools: set[int] = set()
        ports: set[str] = set()
        for sandbox in list(self.sandboxes):
            if id(sandbox) in sandbox_ids and sandbox.started:
                pools |= {id(p) for p in [sandbox._pool, *sandbox._extra_pools.values()] if p is not None}
                proxy = sandbox.packages
                if proxy is not None and proxy._server is not None:
                    ports.add(f"port {proxy.port}")
        return pools, ports

    def pids_of(self, pool_ids: set[int]) -> set[int]:
        """The zygote (``unshare``) pids of the given pools' live slots."""
        pids: set[int] = set()
        for pool in list(self.pools):
            if id(pool) in pool_ids:
                for slot in [*pool._slots.values(), *pool._fresh.values()]:
                    if slot.pid is not None:
                        pids.add(slot.pid)
        return pids

    def describe(self, pool_ids: set[int]) -> list[str]:
        return [
            f"a SlotPool of {len(p._slots)} slot(s) never closed"
            for p in list(self.pools)
            if id(p) in pool_ids and not p._closed
        ]


@dataclass
class Snapshot:
    threads: set[int] = field(default_factory=set)
    processes: set[int] = field(default_factory=set)
    sockets: set[int] = field(default_factory=set)
    temp: set[str] = field(default_factory=set)
    pools: set[int] = field(default_factory=set)
    sandboxes: set[int] = field(default_factory=set)

    @classmethod
    def take(cls, registry: PoolRegistry) -> Snapshot:
        return cls(
            threads={t.ident for t in threading.enumerate() if t.ident is not None},
            processes=set(children()),
            sockets=set(listening_sockets()),
            temp=temp_entries(),
            pools=registry.open_pools(),
            sandboxes=registry.open_sandboxes(),
        )


def _lifelong(thread: threading.Thread) -> bool:
    return thread.name.startswith(tuple(LIFELONG_THREADS))


def leaks_since(before: Snapshot, registry: PoolRegistry, kill: bool = True) -> tuple[list[str], Snapshot]:
    """What is new since ``before`` and still there after ``GRACE_S``: one line each (empty: nothing),
    and the snapshot to compare the next test with (a leak is named once, then taken as known)."""
    deadline = time.monotonic() + GRACE_S
    while True:
        owned_pools, owned_ports = registry.owned_by(before.sandboxes)  # started lazily by an older sandbox
        new_pools = registry.open_pools() - before.pools - owned_pools
        pool_pids = registry.pids_of(before.pools | owned_pools)  # a pool of before's may have replaced a slot
        reap_zombies(before.processes | pool_pids)
        me = threading.current_thread()
        threads = [
            t for t in threading.enumerate()
            if t.ident not in before.threads and t.is_alive() and not _lifelong(t) and t is not me
        ]  # fmt: skip
        procs = {
            pid for pid, state in children().items()
            if pid not in before.processes and state != "Z" and pid not in pool_pids
        }  # fmt: skip
        sockets = {i: a for i, a in listening_sockets().items() if i not in before.sockets and a not in owned_ports}
        temp = temp_entries() - before.temp
        if not (new_pools or threads or procs or sockets or temp) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    found = registry.describe(new_pools)
    found += [f"thread {t.name!r} ({'daemon' if t.daemon else 'non-daemon'})" for t in threads]
    found += [f"process {describe_process(pid)}" for pid in sorted(procs)]
    found += [f"a listening socket on {a}" for a in sockets.values()]
    found += [f"temporary entry {os.path.join(tempfile.gettempdir(), n)}" for n in sorted(temp)]
    for pid in procs if kill else ():  # ended here, so that the next test is not blamed for them
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    after = Snapshot.take(registry)
    after.processes -= procs
    return found, after
