"""The zygote's calls into the kernel through libc (``Syscalls``: mounts, namespaces, prctl, syscall
filters, a fork without CPython's after-fork hooks) and the kernel constants they take.

Runs inside the sandbox, in the zygote and in each run's process (``dojo.sandbox.guest``):
standard library only.
"""

from __future__ import annotations

import os
import struct
from typing import Any

CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
IPC_RMID = 0  # shmctl, semctl, msgctl: remove the object
CLONE_NEWNET = 0x40000000
CLONE_NEWUSER = 0x10000000
PR_CAPBSET_DROP = 24
LINUX_CAPABILITY_VERSION_3 = 0x20080522
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MNT_DETACH = 2
PR_SET_NO_NEW_PRIVS = 38
PR_SET_DUMPABLE = 4
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "riscv64": 41, "ppc64le": 203, "s390x": 217}


class Syscalls:
    """The part of the zygote that talks to the kernel through libc: mounts, namespaces, prctl and
    a fork without CPython's after-fork hooks. Every failure is an ``OSError`` naming the call."""

    def __init__(self) -> None:
        import ctypes

        self.ctypes = ctypes
        self.libc = ctypes.CDLL(None, use_errno=True)
        # ctypes makes a function object on first use; resolving the ones every child calls here
        # keeps that work (and its page faults) out of each run.
        self.libc.unshare, self.libc.setns  # noqa: B018
        # glibc's fork() without CPython's after-fork work (PyDLL: the GIL stays held across the
        # call). That work re-creates the locks other threads might have held, chiefly through the
        # threading module's hook, and in a child that only runs one program it writes ~150 pages
        # that have to be copied first: ~0.25 ms a run. The zygote never starts a thread, so its
        # interpreter is consistent in the child as it is; ``RunProcesses.fork_run`` does the one thing a
        # fresh process must have, a random seed of its own.
        self.raw_fork = ctypes.PyDLL(None, use_errno=True).fork
        self.raw_fork.restype = ctypes.c_int
        self.raw_fork.argtypes = []

    def check(self, ret: int, what: str) -> None:
        if ret != 0:
            err = self.ctypes.get_errno()
            raise OSError(err, f"{what}: {os.strerror(err)}")

    def mount(self, src: str | None, dst: str, fstype: str | None, flags: int, data: str = "") -> None:
        def b(s: str | None) -> bytes | None:
            return s.encode() if s else None

        self.check(
            self.libc.mount(b(src), b(dst), b(fstype), self.ctypes.c_ulong(flags), b(data)),
            f"mount {src} on {dst}",
        )

    def umount(self, path: str) -> None:
        self.check(self.libc.umount2(path.encode(), MNT_DETACH), f"umount {path}")

    def unshare(self, flags: int) -> None:
        self.check(self.libc.unshare(flags), "unshare")

    def setns(self, fd: int, nstype: int) -> None:
        self.check(self.libc.setns(fd, nstype), "setns")

    def prctl(self, option: int, arg: int) -> None:
        self.check(self.libc.prctl(option, self.ctypes.c_ulong(arg), 0, 0, 0), "prctl")

    def file_identity(self, uid: int, gid: int) -> None:
        """Make ``uid`` and ``gid`` this process's filesystem identity (setfsuid, setfsgid): only
        file access checks change; leaving 0 drops the file capabilities (CAP_DAC_OVERRIDE, ...) from
        the effective set, coming back restores them. OSError where it did not take."""
        self.libc.setfsgid(gid)
        self.libc.setfsuid(uid)
        if self.libc.setfsuid(-1) != uid or self.libc.setfsgid(-1) != gid:  # (-1: no change, the current one)
            raise OSError(f"could not take uid {uid}, gid {gid} as the filesystem identity")

    def syscall_filter(self, program: bytes) -> Any:
        """A ``struct sock_fprog`` over the filter's instructions (built once, installed per run):
        an unsigned short count, padding, then the instructions' address (64-bit layout)."""
        ctypes = self.ctypes
        instructions = ctypes.create_string_buffer(program, len(program))
        address = ctypes.cast(instructions, ctypes.c_void_p).value or 0
        fprog = ctypes.create_string_buffer(struct.pack("=H6xQ", len(program) // 8, address), 16)
        return fprog, instructions  # the header and the instructions it points to, alive together

    def install_filter(self, fprog: Any) -> None:
        """Put this process (and every process it starts) under the syscall filter, for good."""
        self.check(self.libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, fprog[0], 0, 0), "seccomp")

    def fork(self) -> int:
        pid = self.raw_fork()
        if pid < 0:
            err = self.ctypes.get_errno()
            raise OSError(err, f"fork: {os.strerror(err)}")
        return int(pid)
