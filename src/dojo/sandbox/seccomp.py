"""The syscall filter every run is under: a seccomp BPF program that makes the system calls a
program under test has no use for fail with EPERM.

The host builds the programs here, for the machine's architecture, and hands their bytes to each
slot's zygote. The zygote installs its filter on itself once it is set up, so every run it forks
inherits it (installing a filter costs ~0.1-0.3 ms of kernel time, too much to pay per run); the
few calls the zygote still needs stay open only in their exact forms, each one needing a
capability no run has (``zygote_rules``). In rootless mode each run also installs the full filter
after entering its user namespace. A run's children inherit the filters; no run can remove them.

Each blocked family names why: the kernel code behind
these calls is where container escapes have come from (user namespaces, eBPF, io_uring, perf,
keyrings, mounts), or they act on something outside the run (another process's memory, the clock,
the machine). The list is docs/threat-model.md's "Syscall filter" table.

What the filter also closes, because someone who has read it would try them:

- another ABI: a 32-bit ``int 0x80`` call on x86_64 (different numbers) or an x32 call
  (``nr | 0x40000000``) would miss a list of x86_64 numbers, so every call that is not the
  native ABI fails;
- ``clone`` with a namespace flag (the same as ``unshare``); plain ``clone`` (threads,
  ``fork``) is allowed;
- ``clone3``, whose flags live in memory a filter cannot read, fails with ENOSYS, so libc falls
  back to ``clone``, which the filter can check (what Docker and systemd do).
"""

from __future__ import annotations

import platform
import struct
from dataclasses import dataclass

EPERM = 1
ENOSYS = 38

# struct seccomp_data: int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6]
OFFSET_NR = 0
OFFSET_ARCH = 4
OFFSET_ARG0_LOW = 16  # little-endian: the low 32 bits of args[0]

# classic BPF opcodes
LD_W_ABS = 0x20
JEQ_K = 0x15
JGE_K = 0x35
JSET_K = 0x45
RET_K = 0x06
RET_ALLOW = 0x7FFF0000
RET_ERRNO = 0x00050000

X32_SYSCALL_BIT = 0x40000000
# clone's namespace flags (CLONE_NEWTIME's bit is part of the exit signal in clone's flags)
CLONE_NAMESPACE_FLAGS = (
    0x00020000  # CLONE_NEWNS
    | 0x02000000  # CLONE_NEWCGROUP
    | 0x04000000  # CLONE_NEWUTS
    | 0x08000000  # CLONE_NEWIPC
    | 0x10000000  # CLONE_NEWUSER
    | 0x20000000  # CLONE_NEWPID
    | 0x40000000  # CLONE_NEWNET
)


@dataclass(frozen=True)
class Architecture:
    name: str
    audit_arch: int
    numbers: dict[str, int]  # syscall name -> number, for the calls the filter names
    x32_bit: bool = False  # whether another ABI shares this arch value (x86_64's x32)


@dataclass(frozen=True)
class Family:
    name: str
    reason: str
    syscalls: tuple[str, ...]


BLOCKED: tuple[Family, ...] = (
    Family(
        "namespaces",
        "new user, mount, network, PID ... namespaces: a user namespace makes the run root over "
        "fresh copies of kernel objects and opens kernel code that is otherwise root-only (the "
        "origin of many local privilege escalations); a run lives in the namespaces its slot made",
        ("unshare", "setns"),
    ),
    Family(
        "mounts",
        "mounting, pivoting or changing the root: the run's file tree is built once by the slot",
        (
            "mount",
            "umount2",
            "pivot_root",
            "chroot",
            "move_mount",
            "open_tree",
            "open_tree_attr",
            "fsopen",
            "fsconfig",
            "fsmount",
            "fspick",
            "mount_setattr",
        ),
    ),
    Family(
        "tracing others",
        "reading or writing another process's memory or file table (the grader's harness is a process "
        "in the same slot)",
        ("ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd"),
    ),
    Family(
        "keyrings",
        "kernel keyrings are not namespaced: a run could read or fill keys of other users of the kernel",
        ("add_key", "request_key", "keyctl"),
    ),
    Family("bpf", "eBPF programs and maps: a large in-kernel attack surface; no program under test needs it", ("bpf",)),
    Family(
        "perf events",
        "performance counters leak timing of other processes and have a history of kernel bugs",
        ("perf_event_open",),
    ),
    Family(
        "userfaultfd",
        "lets a program stall the kernel at a page fault of its choosing: the classic way to win kernel races",
        ("userfaultfd",),
    ),
    Family(
        "io_uring",
        "a second system-call interface the filter cannot see into, with many kernel vulnerabilities; "
        "runtimes (libuv) fall back to plain calls",
        ("io_uring_setup", "io_uring_enter", "io_uring_register"),
    ),
    Family(
        "kernel modules and kexec",
        "loading code into, or replacing, the running kernel",
        ("init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load"),
    ),
    Family(
        "the machine",
        "acting on the machine rather than the run: reboot, swap, process accounting, the clocks, the "
        "host name, the kernel log, quotas, the terminal, port I/O",
        (
            "reboot",
            "swapon",
            "swapoff",
            "acct",
            "settimeofday",
            "clock_settime",
            "clock_adjtime",
            "adjtimex",
            "sethostname",
            "setdomainname",
            "syslog",
            "quotactl",
            "quotactl_fd",
            "vhangup",
            "iopl",
            "ioperm",
            "nfsservctl",
            "lookup_dcookie",
            "uselib",
        ),
    ),
    Family(
        "file handles",
        "opening a file by its handle bypasses the directory tree the run was given (the 'shocker' escape)",
        ("open_by_handle_at", "name_to_handle_at"),
    ),
    Family(
        "fanotify",
        "watching the whole file system's accesses",
        ("fanotify_init",),
    ),
)

_X86_64 = {
    "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161, "unshare": 272, "setns": 308,
    "clone": 56, "clone3": 435, "move_mount": 429, "open_tree": 428, "open_tree_attr": 467, "fsopen": 430,
    "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442, "ptrace": 101,
    "process_vm_readv": 310, "process_vm_writev": 311, "kcmp": 312, "pidfd_getfd": 438, "add_key": 248,
    "request_key": 249, "keyctl": 250, "bpf": 321, "perf_event_open": 298, "userfaultfd": 323,
    "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "init_module": 175,
    "finit_module": 313, "delete_module": 176, "kexec_load": 246, "kexec_file_load": 320, "reboot": 169,
    "swapon": 167, "swapoff": 168, "acct": 163, "settimeofday": 164, "clock_settime": 227,
    "clock_adjtime": 305, "adjtimex": 159, "sethostname": 170, "setdomainname": 171, "syslog": 103,
    "quotactl": 179, "quotactl_fd": 443, "vhangup": 153, "iopl": 172, "ioperm": 173, "nfsservctl": 180,
    "lookup_dcookie": 212, "uselib": 134, "open_by_handle_at": 304, "name_to_handle_at": 303,
    "fanotify_init": 300,
}  # fmt: skip
# aarch64 uses the generic table (asm-generic/unistd.h); it has no iopl, ioperm or uselib.
_GENERIC = {
    "mount": 40, "umount2": 39, "pivot_root": 41, "chroot": 51, "unshare": 97, "setns": 268, "clone": 220,
    "clone3": 435, "move_mount": 429, "open_tree": 428, "open_tree_attr": 467, "fsopen": 430,
    "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442, "ptrace": 117,
    "process_vm_readv": 270, "process_vm_writev": 271, "kcmp": 272, "pidfd_getfd": 438, "add_key": 217,
    "request_key": 218, "keyctl": 219, "bpf": 280, "perf_event_open": 241, "userfaultfd": 282,
    "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "init_module": 105,
    "finit_module": 273, "delete_module": 106, "kexec_load": 104, "kexec_file_load": 294, "reboot": 142,
    "swapon": 224, "swapoff": 225, "acct": 89, "settimeofday": 170, "clock_settime": 112,
    "clock_adjtime": 266, "adjtimex": 171, "sethostname": 161, "setdomainname": 162, "syslog": 116,
    "quotactl": 60, "quotactl_fd": 443, "vhangup": 58, "nfsservctl": 42, "lookup_dcookie": 18,
    "open_by_handle_at": 265, "name_to_handle_at": 264, "fanotify_init": 262,
}  # fmt: skip

ARCHITECTURES = {
    "x86_64": Architecture("x86_64", 0xC000003E, _X86_64, x32_bit=True),
    "aarch64": Architecture("aarch64", 0xC00000B7, _GENERIC),
}


def blocked_syscalls() -> list[str]:
    """Every syscall the filter refuses (on some architecture), in the families' order."""
    return [name for family in BLOCKED for name in family.syscalls]


@dataclass(frozen=True)
class ArgumentRule:
    """Allow a blocked call only with one argument equal to one of ``values`` (an exact form the
    slot's zygote itself uses; a run lacks the capability every such form needs)."""

    syscall: str
    arg: int
    values: tuple[int, ...]
    wide: bool = False  # an unsigned long: its upper 32 bits must be 0 too (an int's are ignored)


CLONE_NEWIPC = 0x08000000
CLONE_NEWNET = 0x40000000
CLONE_NEWUSER = 0x10000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND = 1, 2, 4, 8, 32, 4096
MNT_DETACH = 2
MOUNT_FORMS = (  # scratch tmpfs (and mqueue), and a hidden path's bind and its read-only remount
    MS_NOSUID | MS_NODEV,
    MS_NOSUID | MS_NODEV | MS_NOEXEC,
    MS_BIND,
    MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV,
)


def zygote_rules(rootless: bool) -> tuple[ArgumentRule, ...]:
    """What a slot's zygote still calls once it is under the filter, in exactly its forms: fresh
    scratch mounts (tmpfs, mqueue), the read-only binds that hide a request's ``hidden`` paths,
    and their unmounts, a new IPC namespace, joining the host's
    network for a run that may use it, and (rootless) each run's nested user namespace. Every one
    needs CAP_SYS_ADMIN, which no run has (root mode: an unprivileged uid, and no way to a user
    namespace; rootless: the run's own filter, installed after that namespace, refuses them all)."""
    unshare = (CLONE_NEWIPC, CLONE_NEWUSER) if rootless else (CLONE_NEWIPC,)
    return (
        ArgumentRule("unshare", 0, unshare),
        ArgumentRule("setns", 1, (CLONE_NEWNET,)),
        ArgumentRule("mount", 3, MOUNT_FORMS, wide=True),
        ArgumentRule("umount2", 1, (MNT_DETACH,)),
    )


def build_filter(arch: Architecture, rules: tuple[ArgumentRule, ...] = ()) -> bytes:
    """The filter as an array of ``struct sock_filter`` (what ``PR_SET_SECCOMP`` takes)."""
    ruled = {r.syscall for r in rules}
    deny = [name for name in blocked_syscalls() if name in arch.numbers and name not in ruled]
    # Instructions as (code, jump-if-true label, jump-if-false label, k); labels resolve below.
    program: list[tuple[int, str | None, str | None, int]] = [
        (LD_W_ABS, None, None, OFFSET_ARCH),
        (JEQ_K, None, "deny", arch.audit_arch),
        (LD_W_ABS, None, None, OFFSET_NR),
    ]
    if arch.x32_bit:
        program.append((JGE_K, "deny", None, X32_SYSCALL_BIT))
    program.append((JEQ_K, "enosys", None, arch.numbers["clone3"]))
    program.append((JEQ_K, "clone", None, arch.numbers["clone"]))
    program += [(JEQ_K, f"rule:{r.syscall}", None, arch.numbers[r.syscall]) for r in rules]
    program += [(JEQ_K, "deny", None, arch.numbers[name]) for name in deny]
    program.append((RET_K, None, None, RET_ALLOW))  # no call of the list
    labels = {"clone": len(program)}
    program += [
        (LD_W_ABS, None, None, OFFSET_ARG0_LOW),
        (JSET_K, "deny", "allow", CLONE_NAMESPACE_FLAGS),
    ]
    for rule in rules:  # BPF jumps only forward: every block ends at "allow" or "deny" below
        labels[f"rule:{rule.syscall}"] = len(program)
        low = OFFSET_ARG0_LOW + 8 * rule.arg
        if rule.wide:
            program += [(LD_W_ABS, None, None, low + 4), (JEQ_K, None, "deny", 0)]
        program.append((LD_W_ABS, None, None, low))
        program += [(JEQ_K, "allow", None, value & 0xFFFFFFFF) for value in rule.values]
        program.append((JEQ_K, "deny", "deny", 0))  # none matched
    labels["allow"] = len(program)
    program.append((RET_K, None, None, RET_ALLOW))
    labels["enosys"] = len(program)
    program.append((RET_K, None, None, RET_ERRNO | ENOSYS))
    labels["deny"] = len(program)
    program.append((RET_K, None, None, RET_ERRNO | EPERM))

    def offset(at: int, label: str | None) -> int:
        if label is None:
            return 0
        jump = labels[label] - at - 1
        if not 0 <= jump <= 255:
            raise ValueError(f"seccomp filter jump out of range ({jump})")
        return jump

    return b"".join(
        struct.pack("<HBBI", code, offset(i, jt), offset(i, jf), k) for i, (code, jt, jf, k) in enumerate(program)
    )


@dataclass(frozen=True)
class SlotFilters:
    """The programs a slot installs: ``zygote`` once, in the zygote when it is ready (every run
    inherits it, at no cost per run); ``run`` in each run's process after its set-up, only where the
    zygote's filter must leave a run's set-up call open (rootless: the nested user namespace)."""

    zygote: bytes
    run: bytes | None


def filters_for_this_machine(rootless: bool) -> SlotFilters | None:
    """The slot filters for the machine's architecture, or None where dojo has no syscall table."""
    arch = ARCHITECTURES.get(platform.machine())
    if arch is None:
        return None
    return SlotFilters(zygote=build_filter(arch, zygote_rules(rootless)), run=build_filter(arch) if rootless else None)
