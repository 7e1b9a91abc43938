"""Control groups for slots: detect v1 or v2 at start, create one group per slot, remove it after.

A slot's zygote joins its group once (joining a v1 group costs an RCU grace period, so never per
run); every child it forks inherits the group, so memory and process limits cover the whole tree.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from dojo.sandbox.errors import IsolationUnavailable

CGROUP_ROOT = Path("/sys/fs/cgroup")
CONTROLLERS = ("memory", "pids")


@dataclass(frozen=True)
class CgroupLayout:
    """Where this process may create groups: one parent directory per controller."""

    version: int
    parents: dict[str, Path] = field(default_factory=dict)

    def describe(self) -> str:
        where = ", ".join(f"{k}={v}" for k, v in self.parents.items())
        return f"cgroup v{self.version} ({where})"


def _own_cgroups() -> dict[str, str]:
    """Map controller name ("" for the unified hierarchy) to this process's group path."""
    result: dict[str, str] = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for name in controllers.split(",") if controllers else [""]:
            result[name] = path
    return result


def detect(root: Path = CGROUP_ROOT) -> CgroupLayout:
    """Find a usable memory+pids hierarchy, or raise IsolationUnavailable saying what is missing."""
    override = os.environ.get("DOJO_CGROUP_PARENT")
    own = _own_cgroups()
    unified = root / "cgroup.controllers"
    if unified.exists():
        available = unified.read_text().split()
        missing = [c for c in CONTROLLERS if c not in available]
        if missing:
            raise IsolationUnavailable(
                f"cgroup v2 is mounted at {root} but the {', '.join(missing)} controller(s) are not "
                "enabled; enable them in the parent's cgroup.subtree_control"
            )
        parent = Path(override) if override else root / own.get("", "/").lstrip("/")
        return CgroupLayout(2, {c: parent for c in CONTROLLERS})
    parents: dict[str, Path] = {}
    for c in CONTROLLERS:
        mount = root / c
        if not mount.is_dir():
            raise IsolationUnavailable(
                f"no cgroup hierarchy with the {c} controller at {mount} (cgroup v1) and no cgroup v2 "
                f"at {root}; dojo needs memory and pids controllers to enforce limits"
            )
        parents[c] = Path(override) / c if override else mount / own.get(c, "/").lstrip("/")
    return CgroupLayout(1, parents)


class SlotCgroups:
    """The groups of one pool: a pool directory per controller, one sub-directory per slot."""

    def __init__(self, layout: CgroupLayout, name: str | None = None) -> None:
        self.layout = layout
        self.name = name or f"dojo-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.pool_dirs: dict[str, Path] = {}

    def sweep_stale(self) -> int:
        """Remove the empty groups of dojo processes that died without cleaning up (SIGKILL)."""
        removed = 0
        for parent in dict.fromkeys(self.layout.parents.values()):
            if not parent.is_dir():
                continue
            for d in parent.glob("dojo-*"):
                try:
                    pid = int(d.name.split("-")[1])
                except (IndexError, ValueError):
                    continue
                if pid == os.getpid() or _alive(pid):
                    continue
                for child in d.iterdir():
                    if child.is_dir():
                        _rmdir_retry(child, 0)
                if _rmdir_retry(d, 0):
                    removed += 1
        return removed

    def create_pool(self) -> None:
        with contextlib.suppress(OSError):
            self.sweep_stale()
        try:
            for controller, parent in self.layout.parents.items():
                d = parent / self.name
                if d not in self.pool_dirs.values():  # v2: one directory serves both controllers
                    d.mkdir()
                self.pool_dirs[controller] = d
            if self.layout.version == 2:
                d = next(iter(self.pool_dirs.values()))
                self._enable_v2_controllers(d)
        except PermissionError as e:
            raise IsolationUnavailable(
                f"cannot create cgroups under {e.filename}: run as root, or give dojo a delegated "
                "cgroup (systemd-run --scope -p Delegate=yes) and point DOJO_CGROUP_PARENT at it"
            ) from e
        except OSError as e:
            if e.errno != errno.EROFS:
                raise
            raise IsolationUnavailable(
                f"cannot create cgroups under {e.filename}: the cgroup filesystem is mounted read-only, as "
                "in a container started without write access to it; start the container with a writable "
                "cgroup (docker run --privileged, or --cgroupns=private with /sys/fs/cgroup mounted rw)"
            ) from e

    @staticmethod
    def _enable_v2_controllers(pool_dir: Path) -> None:
        parent_ctl = pool_dir.parent / "cgroup.subtree_control"
        try:
            parent_ctl.write_text(" ".join(f"+{c}" for c in CONTROLLERS))
        except OSError as e:
            if e.errno == errno.EBUSY:
                raise IsolationUnavailable(
                    f"cgroup v2: cannot enable memory and pids under {pool_dir.parent} because that "
                    "group holds processes; start dojo in a delegated sub-group (systemd-run --scope "
                    "-p Delegate=yes) or set DOJO_CGROUP_PARENT to an empty delegated group"
                ) from e
            raise
        (pool_dir / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in CONTROLLERS))

    def create_slot(self, slot: str) -> dict[str, str]:
        """Create the slot's groups; returns controller -> directory for the zygote to join."""
        paths: dict[str, str] = {}
        for controller, pool_dir in self.pool_dirs.items():
            d = pool_dir / slot
            d.mkdir(exist_ok=True)
            paths[controller] = str(d)
        return paths

    def _dirs(self) -> list[Path]:
        """Each pool directory once (on v2 the controllers share one)."""
        return list(dict.fromkeys(self.pool_dirs.values()))

    def kill_slot(self, slot: str) -> None:
        """SIGKILL every process left in the slot's groups."""
        for pool_dir in self._dirs():
            d = pool_dir / slot
            kill_file = d / "cgroup.kill"
            if kill_file.exists():
                with contextlib.suppress(OSError):
                    kill_file.write_text("1")
                continue
            for _ in range(100):
                try:
                    pids = [int(p) for p in (d / "cgroup.procs").read_text().split()]
                except OSError:
                    break
                if not pids:
                    break
                for pid in pids:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                time.sleep(0.005)

    def remove_slot(self, slot: str, timeout: float = 5.0) -> bool:
        """Kill and remove the slot's groups; True when they are gone."""
        self.kill_slot(slot)
        done = True
        for pool_dir in self._dirs():
            d = pool_dir / slot
            if not _rmdir_retry(d, timeout):
                done = False
        return done

    def remove_pool(self, timeout: float = 5.0) -> bool:
        done = True
        for pool_dir in self._dirs():
            if not pool_dir.exists():
                continue
            for child in pool_dir.iterdir():
                if child.is_dir():
                    self.remove_slot(child.name, timeout)
            if not _rmdir_retry(pool_dir, timeout):
                done = False
        return done


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _rmdir_retry(d: Path, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        try:
            d.rmdir()
            return True
        except FileNotFoundError:
            return True
        except OSError as e:
            if e.errno != errno.EBUSY or time.monotonic() > deadline:
                return False
            time.sleep(0.01)
