"""The syscall filter: one hostile run per blocked family, each also run with the filter off to
show that the filter (not a missing capability) is what refuses the call."""

from __future__ import annotations

import json
import platform
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from dojo.sandbox import AsyncSandbox, Program, Verdict
from dojo.sandbox.seccomp import ARCHITECTURES, BLOCKED, build_filter, filters_for_this_machine, zygote_rules
from tests.sandbox.conftest import SKIP_REASON, requires_isolation, root_only

EPERM, ENOSYS = 1, 38
X86_64 = platform.machine() == "x86_64"
pytestmark = [requires_isolation, pytest.mark.skipif(not X86_64, reason="the probes use x86_64 syscall numbers")]

# family -> {probe name: (syscall number, args)}; args chosen so that, without the filter, the
# kernel answers something other than EPERM (a success, EFAULT, EBADF, ENOSYS ...).
PROBES: dict[str, dict[str, tuple[int, tuple[int, ...]]]] = {
    "namespaces": {"unshare(CLONE_NEWUSER)": (272, (0x10000000,)), "setns(-1)": (308, (-1, 0))},
    "mounts": {
        "mount(NULL)": (165, (0, 0, 0, 0, 0)),
        "open_tree(NULL)": (428, (-100, 0, 0)),
        "chroot(NULL)": (161, (0,)),
    },
    "tracing others": {
        "ptrace(PEEKDATA, no such pid)": (101, (2, 999999, 0, 0)),
        "process_vm_readv(self)": (310, ("PID", 0, 0, 0, 0, 0)),
        "kcmp(self, self)": (312, ("PID", "PID", 0, 0, 0)),
        "pidfd_getfd(-1)": (438, (-1, 0, 0)),
    },
    "keyrings": {"keyctl(GET_KEYRING_ID, session)": (250, (0, -3, 0)), "add_key(NULL)": (248, (0, 0, 0, 0, 0))},
    "bpf": {"bpf(999)": (321, (999, 0, 0))},
    "perf events": {"perf_event_open(NULL)": (298, (0, 0, -1, -1, 0))},
    "userfaultfd": {"userfaultfd(USER_MODE_ONLY)": (323, (1,))},
    "io_uring": {"io_uring_setup(0, NULL)": (425, (0, 0))},
    "kernel modules and kexec": {"finit_module(-1)": (313, (-1, 0, 0)), "kexec_load(NULL)": (246, (0, 0, 0, 0))},
    "the machine": {
        "clock_settime(NULL)": (227, (0, 0)),
        "quotactl(NULL)": (179, (0, 0, 0, 0)),
        "iopl(0)": (172, (0,)),
    },
    "file handles": {"open_by_handle_at(-1)": (304, (-1, 0, 0)), "name_to_handle_at(NULL)": (303, (-100, 0, 0, 0, 0))},
    "fanotify": {"fanotify_init(REPORT_FID)": (300, (0x200, 0))},
    "another ABI": {"x32 getpid": (0x40000000 | 39, ())},
}

PROBE_PROGRAM = """
import ctypes, json, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
out = {}
for name, (nr, args) in json.loads(sys.stdin.read()).items():
    args = [os.getpid() if a == "PID" else a for a in args]
    ctypes.set_errno(0)
    ret = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    out[name] = ctypes.get_errno() if ret < 0 else 0
print(json.dumps(out))
"""


@pytest_asyncio.fixture(scope="module")
async def unfiltered() -> AsyncIterator[AsyncSandbox]:
    """The same sandbox with the filter off: the control that shows what the filter stops."""
    if SKIP_REASON:
        pytest.skip(SKIP_REASON)
    async with AsyncSandbox(pool_size=1, syscall_filter=False) as sb:
        yield sb


async def probe(sb: AsyncSandbox, probes: dict[str, tuple[int, tuple[int, ...]]]) -> dict[str, int]:
    result = await sb.run(Program(language="python", source=PROBE_PROGRAM, stdin=json.dumps(probes)))
    assert result.verdict == Verdict.ACCEPTED, result.stderr
    return dict(json.loads(result.stdout))


def test_every_family_is_probed() -> None:
    assert {f.name for f in BLOCKED} | {"another ABI"} == set(PROBES)


@pytest.mark.parametrize("family", sorted(PROBES))
async def test_blocked_family_fails_with_eperm(sandbox: AsyncSandbox, family: str) -> None:
    assert await probe(sandbox, PROBES[family]) == dict.fromkeys(PROBES[family], EPERM)


@root_only
@pytest.mark.parametrize("family", sorted(PROBES))
async def test_without_the_filter_the_same_calls_get_through(unfiltered: AsyncSandbox, family: str) -> None:
    """Every probe answers something else without the filter, so the EPERM above is the filter's."""
    errnos = await probe(unfiltered, PROBES[family])
    assert EPERM not in errnos.values(), errnos


async def test_clone3_says_enosys_so_libc_falls_back_to_clone(sandbox: AsyncSandbox) -> None:
    assert await probe(sandbox, {"clone3": (435, (0, 0))}) == {"clone3": ENOSYS}


CLONE_NEWUSER = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
pid = libc.syscall(ctypes.c_long(56), ctypes.c_long(0x10000000 | 17), *[ctypes.c_long(0)] * 4)
if pid == 0:
    os._exit(7)
if pid > 0:
    print("child", os.waitpid(pid, 0)[1] >> 8)
else:
    print("errno", ctypes.get_errno())
"""


async def test_clone_with_a_namespace_flag_is_refused_but_fork_and_threads_work(sandbox: AsyncSandbox) -> None:
    result = await sandbox.run(Program(language="python", source=CLONE_NEWUSER))
    assert result.stdout.strip() == "errno 1", result.stderr
    source = (
        "import os, threading, subprocess\n"
        "t = threading.Thread(target=print, args=('thread',)); t.start(); t.join()\n"
        "pid = os.fork()\n"
        "os._exit(3) if pid == 0 else print('fork', os.waitpid(pid, 0)[1] >> 8)\n"
        "print(subprocess.run(['echo', 'exec'], capture_output=True, text=True).stdout.strip())\n"
    )
    result = await sandbox.run(Program(language="python", source=source))
    assert result.stdout.split() == ["thread", "fork", "3", "exec"], result.stderr


@root_only
async def test_clone_with_a_namespace_flag_gets_through_without_the_filter(unfiltered: AsyncSandbox) -> None:
    result = await unfiltered.run(Program(language="python", source=CLONE_NEWUSER))
    assert result.stdout.strip() == "child 7", result.stderr


UNSHARE_TOOL = "unshare --user --map-root-user id -u; echo status $?"


async def test_a_program_the_run_execs_inherits_the_filter(sandbox: AsyncSandbox) -> None:
    result = await sandbox.run(Program(language="bash", source=UNSHARE_TOOL))
    assert "Operation not permitted" in result.stderr
    assert result.stdout.strip().endswith("status 1")


@root_only
async def test_the_unshare_tool_works_without_the_filter(unfiltered: AsyncSandbox) -> None:
    result = await unfiltered.run(Program(language="bash", source=UNSHARE_TOOL))
    assert result.stdout.split() == ["0", "status", "0"], result.stderr


REPLACE_FILTER = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
class Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
allow = (ctypes.c_uint64 * 1)(0x7FFF0000 << 32 | 0x0006)  # one instruction: RET ALLOW
prog = Fprog(1, ctypes.cast(allow, ctypes.c_void_p))
print("install", libc.prctl(22, 2, ctypes.byref(prog), 0, 0))
print("strict mode", libc.prctl(22, 0, 0, 0, 0), ctypes.get_errno())
print("unshare", libc.unshare(0x10000000), ctypes.get_errno())
"""


async def test_a_run_cannot_lift_the_filter_by_installing_its_own(sandbox: AsyncSandbox) -> None:
    """Filters stack and the strictest answer wins: an allow-all filter of the run's changes nothing."""
    result = await sandbox.run(Program(language="python", source=REPLACE_FILTER))
    lines = result.stdout.splitlines()
    assert lines[0] == "install 0", result.stderr
    assert lines[2] == "unshare -1 1"


INT80 = r"""
#include <stdio.h>
int main(void) {
    long ret;
    /* the 32-bit ABI's unshare (310) with CLONE_NEWUSER: numbers a list of x86_64 calls would miss */
    __asm__ volatile ("int $0x80" : "=a"(ret) : "a"(310L), "b"(0x10000000L) : "memory");
    printf("%ld\n", ret);
    return 0;
}
"""


async def test_the_32_bit_abi_is_refused_whole(sandbox: AsyncSandbox) -> None:
    result = await sandbox.run(Program(language="c", source=INT80))
    assert result.verdict == Verdict.ACCEPTED, result.compile_output or result.stderr
    assert result.stdout.strip() == "-1"  # -EPERM, as the raw call returns it


async def test_a_session_runs_under_the_filter(fast_sandbox: AsyncSandbox) -> None:
    async with await fast_sandbox.open_session("python") as session:
        first = await session.exec("import ctypes; libc = ctypes.CDLL(None, use_errno=True)")
        assert first.verdict == Verdict.ACCEPTED, first.stderr
        second = await session.exec("print(libc.unshare(0x10000000), ctypes.get_errno())")
        assert second.stdout.strip() == "-1 1", second.stderr


def test_the_filters_fit_classic_bpf_on_each_architecture() -> None:
    for arch in ARCHITECTURES.values():
        for rootless in (False, True):
            program = build_filter(arch, zygote_rules(rootless))
            assert len(program) % 8 == 0 and len(program) // 8 < 256
    root, rootless = filters_for_this_machine(False), filters_for_this_machine(True)
    assert root is not None and root.run is None
    assert rootless is not None and rootless.run == build_filter(ARCHITECTURES["x86_64"])


ZYGOTE_FORMS = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
def errno(ret):
    return ctypes.get_errno() if ret < 0 else 0
net = os.open("/proc/self/ns/net", os.O_RDONLY)
print(errno(libc.unshare(0x08000000)),
      errno(libc.mount(b"tmpfs", b"/tmp", b"tmpfs", ctypes.c_ulong(2 | 4), b"size=1m")),
      errno(libc.mount(b"mqueue", b"/dev/mqueue", b"mqueue", ctypes.c_ulong(2 | 4 | 8), None)),
      errno(libc.umount2(b"/tmp", 2)),
      errno(libc.setns(net, 0x40000000)))
"""


async def test_the_forms_the_zygote_keeps_need_a_capability_no_run_has(sandbox: AsyncSandbox) -> None:
    """The zygote's filter leaves open exactly the calls the zygote makes after set-up (a new IPC
    namespace, scratch tmpfs and mqueue mounts, their unmounts, joining the host network): a run
    that makes them, in those exact forms, still gets EPERM, from the kernel's capability check."""
    result = await sandbox.run(Program(language="python", source=ZYGOTE_FORMS))
    assert result.stdout.split() == ["1"] * 5, result.stderr
