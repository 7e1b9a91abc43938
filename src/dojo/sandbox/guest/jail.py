"""``Jail``: the slot's isolation as its zygote builds and keeps it: the loopback interface, the new
root (read-only binds, a minimal /dev, a fresh /proc, scratch tmpfs, ``pivot_root``), the paths a
request hides, the IPC namespace it watches, and the scratch space it wipes after each run.

Runs inside the sandbox, in the zygote: standard library only.
"""

from __future__ import annotations

import fcntl
import os
import socket
import struct
from typing import Any

from dojo.sandbox.guest.syscalls import (
    CLONE_NEWIPC,
    IPC_RMID,
    MS_BIND,
    MS_NODEV,
    MS_NOEXEC,
    MS_NOSUID,
    MS_PRIVATE,
    MS_RDONLY,
    MS_REC,
    MS_REMOUNT,
    SYS_PIVOT_ROOT,
    Syscalls,
)

SIOCGIFFLAGS = 0x8913
SIOCSIFFLAGS = 0x8914

NEW_ROOT = "/tmp"  # a tmpfs is mounted here in the private mount namespace, then pivoted into
BOX = "/box"
SCRATCH = (BOX, "/tmp", "/dev/shm")  # the run's own file systems, each a fresh tmpfs (``mount_scratch``)
HIDDEN = "/.dojo-hidden"  # an empty file and an empty directory, mounted over what a run must not read
MQUEUE = "/dev/mqueue"  # the slot's POSIX message queues, as on any Linux system
SYSVIPC_LISTS = ("/proc/sysvipc/shm", "/proc/sysvipc/sem", "/proc/sysvipc/msg")
# What SysV objects the runs of an IPC namespace may leave behind: their memory outlives the run,
# charged to the slot's memory group, and the zygote must still have some to work with once the
# run is gone (``remove_sysv_objects``). A segment goes with the last process attached to it once
# its maker is gone; at most 64 message queues (of 16 KiB each: 1 MiB) and Linux's traditional
# semaphore limits (32,000 in 128 sets), where the defaults let a run leave 512 MiB of queued
# messages and gigabytes of semaphores.
IPC_SYSCTLS = (("kernel/shm_rmid_forced", "1"), ("kernel/msgmni", "64"), ("kernel/sem", "250 32000 32 128"))
DEVICES = ("null", "zero", "full", "random", "urandom")


class Jail:
    """The slot's isolation, as the zygote builds and keeps it: the loopback interface, the new
    root (read-only binds, a minimal /dev, a fresh /proc, scratch tmpfs), the IPC namespace it
    watches, and the scratch space it wipes after each run."""

    def __init__(self, config: dict[str, Any], sys: Syscalls, uid: int) -> None:
        self.config = config
        self.sys = sys
        self.uid = uid
        self.host_netns: int | None = None
        self.disk_bytes: int = config.get("disk_bytes", 64 << 20)
        self.ipc_fds: list[int] = []
        self.ipc_generation = 0  # counts the IPC namespaces this zygote has moved to
        self.mqueue_empty_size = 0  # the size of the mqueue root with no queue in it (``ipc_in_use``)
        self.hidden: list[str] = []  # the paths masked for the current request (``hide``)
        # an empty scratch directory's size and what each entry adds, where tmpfs counts so (``wipe_scratch``)
        self.dir_sizes: tuple[int, int] | None = None
        self.scratch_devices: frozenset[int] = frozenset()  # the scratch file systems' devices (``mount_scratch``)
        self.box_files: list[str] | None = []  # what the zygote wrote in /box for the last request (None: unknown)

    def loopback_up(self) -> None:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            req = struct.pack("16sH14x", b"lo", 0)
            flags = struct.unpack("16sH14x", fcntl.ioctl(s, SIOCGIFFLAGS, req))[1]
            fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | 0x1 | 0x40))

    def build_root(self) -> None:
        if self.config.get("keep_host_netns"):
            self.host_netns = os.open(self.config["keep_host_netns"], os.O_RDONLY | os.O_CLOEXEC)
        self.sys.mount(None, "/", None, MS_REC | MS_PRIVATE)
        # Extra mounts' sources are held open first: the new root's tmpfs goes over the host's /tmp,
        # and a source under it (a store in a temporary directory) would be hidden by then.
        held = [(os.open(src, os.O_PATH | os.O_CLOEXEC), inside) for src, inside in self.config.get("mounts", [])]
        self.sys.mount("tmpfs", NEW_ROOT, "tmpfs", MS_NOSUID | MS_NODEV, "size=4m,mode=0755")
        r = NEW_ROOT
        ro_flags = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV
        binds: list[str] = ["/usr", "/etc", *self.config.get("extra_ro_paths", [])]
        for top in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
            host = "/" + top
            if os.path.islink(host):
                os.symlink(os.readlink(host), os.path.join(r, top))
            elif os.path.isdir(host):
                binds.append(host)
        for src in binds:
            if not os.path.exists(src):
                continue
            dst = r + src
            if os.path.isdir(src):
                os.makedirs(dst, exist_ok=True)
            else:
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                open(dst, "w").close()
            self.sys.mount(src, dst, None, MS_BIND)
            self.sys.mount(None, dst, None, ro_flags)
        for fd, inside in held:  # e.g. an environment at /env, read-only
            os.makedirs(r + inside, exist_ok=True)
            self.sys.mount(f"/proc/self/fd/{fd}", r + inside, None, MS_BIND | MS_REC)
            self.sys.mount(None, r + inside, None, ro_flags)
            os.close(fd)
        etc_files = self.config.get("etc_files") or {}
        if etc_files:  # the slot's own /etc/hosts and resolv.conf (a network policy's names)
            os.makedirs(r + "/.dojo")
            for name, text in etc_files.items():
                with open(f"{r}/.dojo/{name}", "w") as f:
                    f.write(text)
                os.chmod(f"{r}/.dojo/{name}", 0o644)
                if not os.path.exists(f"{r}/etc/{name}"):
                    continue  # /etc is read-only: a file it lacks cannot be shown
                self.sys.mount(f"{r}/.dojo/{name}", f"{r}/etc/{name}", None, MS_BIND)
                self.sys.mount(None, f"{r}/etc/{name}", None, ro_flags)
        # /dev: a few safe devices, nothing else.
        os.makedirs(r + "/dev", exist_ok=True)
        self.sys.mount("tmpfs", r + "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "size=64k,mode=0755")
        for dev in DEVICES:
            open(f"{r}/dev/{dev}", "w").close()
            self.sys.mount(f"/dev/{dev}", f"{r}/dev/{dev}", None, MS_BIND)
            self.sys.mount(None, f"{r}/dev/{dev}", None, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NOEXEC)
        for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"),
                             ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2")):  # fmt: skip
            os.symlink(target, f"{r}/dev/{name}")
        os.makedirs(r + "/dev/shm")
        os.makedirs(r + MQUEUE)
        os.makedirs(r + "/proc")
        self.sys.mount("proc", r + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        for d in ("tmp", "box"):
            os.makedirs(f"{r}/{d}")
        os.symlink("/tmp", f"{r}/mnt")  # scratch space where programs written for a container expect it
        os.makedirs(f"{r}{HIDDEN}/dir", mode=0o555)
        open(f"{r}{HIDDEN}/file", "w").close()
        os.chmod(f"{r}{HIDDEN}/file", 0o444)
        for path in self.config.get("masked", []):  # in a bound tree (dojo installed under /usr): empty
            self.mask(path, r)
        self.mount_scratch(r)
        os.chdir(r)
        machine = os.uname().machine
        if machine not in SYS_PIVOT_ROOT:
            raise OSError(f"unsupported architecture {machine}")
        self.sys.check(self.sys.libc.syscall(SYS_PIVOT_ROOT[machine], b".", b"."), "pivot_root")
        self.sys.umount(".")
        os.chdir("/")
        self.sys.mount(None, "/", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)

    def watch_ipc(self) -> None:
        """Open what lists the IPC objects of the zygote's current IPC namespace: the three SysV
        lists in /proc and a fresh mqueue mount. Runs share the zygote's namespace, and the zygote
        enters a new one only after a run that left an object behind (``drop_ipc_if_used``).
        Where this cannot be set up, every run gets its own IPC namespace instead (slower: making
        and freeing a namespace per run cost ~15% of ``print(1)`` throughput)."""
        for fd in self.ipc_fds:
            os.close(fd)
        self.ipc_fds = []
        try:
            try:
                self.sys.umount(MQUEUE)
            except OSError:
                pass  # nothing mounted yet
            self.sys.mount("mqueue", MQUEUE, "mqueue", MS_NOSUID | MS_NODEV | MS_NOEXEC)
            self.ipc_fds = [os.open(p, os.O_RDONLY | os.O_CLOEXEC) for p in (*SYSVIPC_LISTS, MQUEUE)]
            self.mqueue_empty_size = os.fstat(self.ipc_fds[-1]).st_size
        except OSError:
            for fd in self.ipc_fds:
                os.close(fd)
            self.ipc_fds = []
            return
        for name, value in IPC_SYSCTLS:  # (this namespace's: an IPC namespace has its own)
            try:  # (where one cannot be set, ``remove_sysv_objects`` still frees what runs leave)
                fd = os.open(f"/proc/sys/{name}", os.O_WRONLY | os.O_CLOEXEC)
                try:
                    os.write(fd, value.encode())
                finally:
                    os.close(fd)
            except OSError:
                pass

    def ipc_in_use(self) -> bool:
        """Whether the current IPC namespace holds a SysV segment, semaphore set or message queue,
        or a POSIX message queue."""
        *lists, mqueue = self.ipc_fds
        for fd in lists:
            if os.pread(fd, 1 << 16, 0).count(b"\n") > 1:  # a header line, then one line per object
                return True
        # the mqueue root grows by a fixed size per queue (ipc/mqueue.c), so its size says "empty" in
        # one call where listing it took eight
        return os.fstat(mqueue).st_size != self.mqueue_empty_size

    def drop_ipc_if_used(self) -> None:
        """Give later runs an empty IPC namespace if the last one left anything in this one, its SysV
        objects removed first (``remove_sysv_objects``)."""
        if self.ipc_fds and self.ipc_in_use():
            self.remove_sysv_objects()
            self.sys.unshare(CLONE_NEWIPC)  # the old one goes with its last process (the forker, replaced)
            self.ipc_generation += 1
            self.watch_ipc()

    def remove_sysv_objects(self) -> None:
        """Remove every SysV shared memory segment, semaphore set and message queue of the current IPC
        namespace, once the processes that made them are gone. They outlive their processes, and
        what they hold stays charged to the slot's memory group: until 2026-12-07 a run that filled
        segments until it was killed left the zygote no memory to read its fetched file with (the
        slot died: a wrong answer graded ``None``, an infrastructure error, in place of 0)."""
        libc = self.sys.libc
        for kind, fd in zip(("shm", "sem", "msg"), self.ipc_fds[:3], strict=True):  # (SYSVIPC_LISTS' order)
            chunks, offset = [], 0
            while chunk := os.pread(fd, 1 << 16, offset):
                chunks.append(chunk)
                offset += len(chunk)
            for line in b"".join(chunks).splitlines()[1:]:  # a header line, then one line per object: its id second
                fields = line.split()
                if len(fields) < 2 or not fields[1].isdigit():
                    continue
                if kind == "sem":
                    libc.semctl(int(fields[1]), 0, IPC_RMID)
                else:
                    (libc.shmctl if kind == "shm" else libc.msgctl)(int(fields[1]), IPC_RMID, None)

    def hide(self, paths: list[str]) -> None:
        """Mount the empty file (or directory) read-only over each of ``paths`` for one request:
        its runs share this mount namespace and cannot unmount (the run filter refuses it), so
        they read nothing there. Absolute paths outside the scratch space (which each request wipes)
        only; one that is missing or a link is skipped. ``unhide`` undoes it."""
        for path in paths:
            scratch = any(path == d or path.startswith(d + "/") for d in (BOX, "/tmp", "/dev", "/proc", HIDDEN))
            if not path.startswith("/") or "/../" in path + "/" or scratch:
                raise ValueError(f"cannot hide {path!r}: an absolute path outside the scratch space is hidden")
            if self.mask(path):
                self.hidden.append(path)

    def mask(self, path: str, root: str = "") -> bool:
        """Mount the empty file or directory read-only over ``root + path`` (a file or a directory;
        anything else, a link or nothing, is left alone: False)."""
        import stat

        target = root + path
        try:
            mode = os.lstat(target).st_mode
        except OSError:
            return False
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            return False
        self.sys.mount(root + HIDDEN + ("/dir" if stat.S_ISDIR(mode) else "/file"), target, None, MS_BIND)
        try:
            self.sys.mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
        except OSError:
            self.sys.umount(target)
            raise
        return True

    def unhide(self) -> None:
        while self.hidden:
            self.sys.umount(self.hidden.pop())

    def mount_scratch(self, root: str = "") -> None:
        """Fresh tmpfs for /box (owned by the run uid), /tmp and /dev/shm."""
        size = self.disk_bytes
        uid = self.uid
        self.sys.mount("tmpfs", root + BOX, "tmpfs", MS_NOSUID | MS_NODEV,
                   f"size={size},nr_inodes=4096,mode=0755,uid={uid},gid={uid}")  # fmt: skip
        self.sys.mount("tmpfs", root + "/tmp", "tmpfs", MS_NOSUID | MS_NODEV,
                   f"size={size},nr_inodes=4096,mode=1777")  # fmt: skip
        self.sys.mount("tmpfs", root + "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV,
                   f"size={size},nr_inodes=1024,mode=1777")  # fmt: skip
        self.dir_sizes = self.probe_dir_sizes([root + "/tmp", root + "/dev/shm", root + BOX])
        self.scratch_devices = frozenset(os.stat(root + d).st_dev for d in SCRATCH)  # (what a fetch may read)
        self.box_files = []

    @staticmethod
    def probe_dir_sizes(directories: list[str]) -> tuple[int, int] | None:
        """The size of an empty tmpfs directory and what one entry adds to it, where a directory's
        size tells how many entries it holds: tmpfs counts a fixed size per entry, so one ``stat``
        replaces listing it. Checked on the fresh, empty mounts by adding and removing an entry;
        None where it does not hold (the scratch directories are then listed after every run)."""
        empty = os.stat(directories[0]).st_size
        probe = os.path.join(directories[0], ".dojo-probe")
        os.mkdir(probe)
        try:
            grown = os.stat(directories[0]).st_size
        finally:
            os.rmdir(probe)
        sizes = {os.stat(d).st_size for d in directories}
        return (empty, grown - empty) if grown > empty and sizes == {empty} else None

    def wipe_scratch(self, disk_bytes: int) -> None:
        """Empty /box, /tmp and /dev/shm for the next run.

        The common case (a few files left by the last run) is unlinked in place; anything more
        (directories, many entries, changed permissions, another size) gets fresh mounts.
        """
        box = os.stat(BOX)
        remount = disk_bytes != self.disk_bytes or box.st_mode & 0o7777 != 0o755
        if not remount:
            for d in SCRATCH:
                if self.counted_empty(d, box.st_size if d == BOX else None):
                    continue  # (most runs leave nothing but the files they were given)
                with os.scandir(d) as it:
                    entries = list(it)
                if len(entries) > 16 or any(e.is_dir(follow_symlinks=False) for e in entries):
                    remount = True
                    break
                for e in entries:
                    os.unlink(e.path)
        if remount:
            for d in SCRATCH:
                self.sys.umount(d)
            self.disk_bytes = disk_bytes
            self.mount_scratch()

    def counted_empty(self, directory: str, size: int | None) -> bool:
        """Whether ``directory`` is empty by its size alone (``dir_sizes``), after unlinking, in /box,
        the files the zygote wrote there: if its size says it holds exactly that many entries and
        each of them is still there to unlink, nothing else is. False where that cannot be told (the
        caller lists the directory)."""
        if self.dir_sizes is None:
            return False
        empty, entry = self.dir_sizes
        size = os.stat(directory).st_size if size is None else size
        if directory != BOX:
            return size == empty
        if self.box_files is None or size != empty + entry * len(self.box_files):
            return False
        try:
            for name in self.box_files:
                os.unlink(os.path.join(BOX, name))
        except OSError:  # renamed, replaced by a directory, ...: list what is there
            return False
        return True
