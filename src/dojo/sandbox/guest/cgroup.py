"""``CgroupHandle``: the slot's cgroups as its zygote sees them: per-run memory and pids limits, the
peak-memory counter, OOM kills (the host creates and removes the groups: ``dojo.sandbox.cgroups``).

Runs inside the sandbox, in the zygote: standard library only.
"""

from __future__ import annotations

import os

from dojo.sandbox.guest.wire import RunLimits

READ_WRITE_FILES = frozenset({"memory.max_usage_in_bytes"})  # cgroup files the zygote keeps open to write too


class CgroupHandle:
    """The slot's cgroups as the zygote sees them (v1: one directory per controller; v2: one for
    both): per-run memory and pids limits, the peak-memory counter, OOM kills."""

    def __init__(self, version: int) -> None:
        self.version = version
        self.controllers: dict[str, int] = {}  # controller -> directory fd
        self.files: dict[tuple[str, str], int] = {}  # (controller, file name) -> fd (``file``)
        self.mem_limit = -1
        self.pids_limit = -1
        self.peak_fd = -1

    def has(self, controller: str) -> bool:
        return controller in self.controllers

    def join(self, groups: dict[str, str]) -> None:
        """Move this process into each controller's group (the host made them) and keep a handle."""
        joined: dict[str, int] = {}
        for name, path in groups.items():
            if path not in joined:  # on v2 both controllers live in one directory
                with open(os.path.join(path, "cgroup.procs"), "w") as f:
                    f.write("0")
                joined[path] = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
            self.controllers[name] = joined[path]

    def file(self, controller: str, filename: str) -> int:
        """An open descriptor of one of the group's files, kept for the zygote's life: every run reads
        or writes a few of them (opening each anew cost 3 system calls a time). A run never holds
        one: every run's process closes all descriptors but its own four."""
        key = (controller, filename)
        fd = self.files.get(key)
        if fd is None:
            fd = self.files[key] = os.open(filename, os.O_RDWR if filename in READ_WRITE_FILES else os.O_RDONLY,
                                           dir_fd=self.controllers[controller])  # fmt: skip
        return fd

    def write(self, controller: str, filename: str, value: str) -> None:
        if controller not in self.controllers:
            return
        if filename in READ_WRITE_FILES:
            os.write(self.file(controller, filename), value.encode())
            return
        fd = os.open(filename, os.O_WRONLY, dir_fd=self.controllers[controller])
        try:
            os.write(fd, value.encode())
        finally:
            os.close(fd)

    def read(self, controller: str, filename: str) -> str:
        if controller not in self.controllers:
            return ""
        return os.pread(self.file(controller, filename), 65536, 0).decode()  # (from 0: the file afresh)

    def tasks(self) -> int | None:
        """How many tasks (threads of every process) the slot holds now; None without a pids group.
        A process counts until it is reaped, so this is exact for the zygote, which reaps them all."""
        if "pids" not in self.controllers:
            return None
        try:
            return int(self.read("pids", "pids.current"))
        except (OSError, ValueError):
            return None

    def memory_usage(self) -> int:
        if "memory" not in self.controllers:
            return 0
        name = "memory.usage_in_bytes" if self.version == 1 else "memory.current"
        return int(self.read("memory", name))

    def set_limits(self, lim: RunLimits, residents: int = 1) -> int:
        """Memory limit = what the group holds now (the zygote, the forker) + the run's limit;
        pids.max = the run's processes + the ``residents`` (the zygote, the forker).

        Returns the usage the limit was based on. A rewrite within 1 MiB of the last is skipped.
        """
        base = self.memory_usage()
        if "memory" in self.controllers and abs(base + lim["memory_bytes"] - self.mem_limit) > (1 << 20):
            self.mem_limit = base + lim["memory_bytes"]
            name = "memory.limit_in_bytes" if self.version == 1 else "memory.max"
            self.write("memory", name, str(self.mem_limit))
        if "pids" in self.controllers and lim["processes"] + residents != self.pids_limit:
            self.pids_limit = lim["processes"] + residents
            self.write("pids", "pids.max", str(self.pids_limit))
        return base

    def reset_peak(self, usage: int | None = None) -> int:
        """Reset the group's peak-memory counter; returns the usage now (``usage``, where the caller
        has just read it).

        v1: write 0 to memory.max_usage_in_bytes. v2: a write to memory.peak resets it only for
        reads through the same open file, so the zygote keeps one descriptor for it.
        """
        if "memory" in self.controllers:
            try:
                if self.version == 1:
                    self.write("memory", "memory.max_usage_in_bytes", "0")
                else:
                    if self.peak_fd < 0:
                        self.peak_fd = os.open("memory.peak", os.O_RDWR, dir_fd=self.controllers["memory"])
                    os.write(self.peak_fd, b"reset")
            except OSError:
                pass
        return self.memory_usage() if usage is None else usage

    def read_peak(self, base: int) -> int:
        if "memory" not in self.controllers:
            return 0
        try:
            if self.version == 1:
                raw = self.read("memory", "memory.max_usage_in_bytes")
            elif self.peak_fd >= 0:
                raw = os.pread(self.peak_fd, 64, 0).decode()
            else:
                return 0
            return max(0, int(raw) - base)
        except (OSError, ValueError):
            return 0

    def oom_kills(self) -> int:
        if "memory" not in self.controllers:
            return 0
        name = "memory.oom_control" if self.version == 1 else "memory.events"
        for line in self.read("memory", name).splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return 0
