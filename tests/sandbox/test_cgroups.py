"""cgroup detection and group layout. Most of these tests run on a fake hierarchy in a temporary
directory (this host mounts cgroup v1 for memory and pids, so v2 can only be checked this way here):
they pin which files dojo reads and writes on each version, not what the kernel does with them. The
last one runs on the host's real cgroup2 mount (controller-less here): the kernel's side of killing a
v2 slot's tree and removing its group, though not v2's memory and pids limits."""

from __future__ import annotations

import errno
import os
import subprocess
import time
from pathlib import Path

import pytest

from dojo.sandbox.cgroups import CgroupLayout, SlotCgroups, _own_cgroups, detect
from dojo.sandbox.errors import IsolationUnavailable


def _v2_root(tmp_path: Path, controllers: str) -> Path:
    root = tmp_path / "cgroup"
    delegated = root / "dojo.scope"
    delegated.mkdir(parents=True)
    (root / "cgroup.controllers").write_text(controllers + "\n")
    (delegated / "cgroup.subtree_control").write_text("")
    return root


def test_v2_is_detected_and_both_controllers_share_one_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _v2_root(tmp_path, "cpuset cpu io memory hugetlb pids rdma")
    monkeypatch.setenv("DOJO_CGROUP_PARENT", str(root / "dojo.scope"))
    layout = detect(root)
    assert layout.version == 2
    assert layout.parents == {"memory": root / "dojo.scope", "pids": root / "dojo.scope"}
    assert "cgroup v2" in layout.describe()


def test_v2_without_the_pids_controller_says_what_to_enable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _v2_root(tmp_path, "cpu io memory")
    monkeypatch.setenv("DOJO_CGROUP_PARENT", str(root / "dojo.scope"))
    with pytest.raises(IsolationUnavailable, match=r"pids controller\(s\) are not enabled.*subtree_control"):
        detect(root)


def test_no_hierarchy_at_all_is_a_clear_start_up_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DOJO_CGROUP_PARENT", raising=False)
    with pytest.raises(IsolationUnavailable, match="needs memory and pids controllers"):
        detect(tmp_path)


def test_v2_pool_enables_memory_and_pids_for_its_slots(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _v2_root(tmp_path, "cpu memory pids")
    monkeypatch.setenv("DOJO_CGROUP_PARENT", str(root / "dojo.scope"))
    groups = SlotCgroups(detect(root), name="dojo-1-test")
    groups.create_pool()
    pool = root / "dojo.scope" / "dojo-1-test"
    # one directory for both controllers, and both delegated one level down, as v2 requires
    assert groups.pool_dirs == {"memory": pool, "pids": pool}
    assert (root / "dojo.scope" / "cgroup.subtree_control").read_text() == "+memory +pids"
    assert (pool / "cgroup.subtree_control").read_text() == "+memory +pids"
    assert groups.create_slot("slot-0") == {"memory": str(pool / "slot-0"), "pids": str(pool / "slot-0")}
    assert (pool / "slot-0").is_dir()


def test_v1_has_one_directory_per_controller(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for controller in ("memory", "pids"):
        (tmp_path / "groups" / controller).mkdir(parents=True)
    monkeypatch.setenv("DOJO_CGROUP_PARENT", str(tmp_path / "groups"))
    (tmp_path / "memory").mkdir()
    (tmp_path / "pids").mkdir()
    layout = detect(tmp_path)
    assert layout.version == 1
    assert layout.parents == {"memory": tmp_path / "groups" / "memory", "pids": tmp_path / "groups" / "pids"}
    groups = SlotCgroups(layout, name="dojo-1-test")
    groups.create_pool()
    assert groups.create_slot("slot-3") == {
        "memory": str(tmp_path / "groups" / "memory" / "dojo-1-test" / "slot-3"),
        "pids": str(tmp_path / "groups" / "pids" / "dojo-1-test" / "slot-3"),
    }


def test_a_read_only_cgroup_filesystem_is_a_clear_start_up_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _v2_root(tmp_path, "cpu memory pids")
    monkeypatch.setenv("DOJO_CGROUP_PARENT", str(root / "dojo.scope"))
    groups = SlotCgroups(detect(root), name="dojo-1-test")

    def read_only(self: Path, *args: object, **kwargs: object) -> None:
        raise OSError(errno.EROFS, "Read-only file system", str(self))

    monkeypatch.setattr(Path, "mkdir", read_only)
    with pytest.raises(IsolationUnavailable, match=r"mounted read-only.*--privileged"):
        groups.create_pool()


def _cgroup2_mount() -> Path | None:
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        before, _, after = line.partition(" - ")
        if after.split()[:1] == ["cgroup2"]:
            return Path(before.split()[4])
    return None


_CGROUP2 = _cgroup2_mount()


@pytest.mark.skipif(
    _CGROUP2 is None or os.geteuid() != 0 or not os.access(_CGROUP2, os.W_OK),
    reason="needs root and a writable cgroup2 mount",
)
def test_on_a_real_cgroup2_mount_a_slot_is_killed_tree_and_all_and_removed() -> None:
    """The kernel's side of v2, on whatever cgroup2 mount this host has (here the controller-less
    hybrid one): ``cgroup.kill`` ends a slot's whole tree, a detached grandchild included, and the
    slot's group can then be removed."""
    assert _CGROUP2 is not None
    parent = _CGROUP2 / _own_cgroups().get("", "/").lstrip("/")
    groups = SlotCgroups(CgroupLayout(2, {"memory": parent, "pids": parent}), name=f"dojo-{os.getpid()}-kill")
    pool = parent / groups.name
    pool.mkdir()
    groups.pool_dirs = {"memory": pool, "pids": pool}  # no controllers to enable on a hybrid mount
    try:
        slot = Path(groups.create_slot("slot-0")["memory"])
        assert (slot / "cgroup.kill").exists()
        procs = slot / "cgroup.procs"

        def join() -> None:
            procs.write_text(str(os.getpid()))

        tree = subprocess.Popen(["sh", "-c", "sleep 300 & setsid sleep 300 & wait"], preexec_fn=join)
        deadline = time.monotonic() + 10
        while len(procs.read_text().split()) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        members = [int(p) for p in procs.read_text().split()]
        assert len(members) == 3 and tree.pid in members
        groups.kill_slot("slot-0")
        assert tree.wait(timeout=10) == -9
        deadline = time.monotonic() + 10
        while "populated 1" in (slot / "cgroup.events").read_text() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert "populated 0" in (slot / "cgroup.events").read_text()
        for pid in members:
            assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]
        assert groups.remove_pool()
        assert not pool.exists()
    finally:
        if pool.exists():
            groups.remove_pool()
