"""cgroup detection and group layout. These tests run on a fake hierarchy in a temporary directory
(this host mounts cgroup v1, so v2 can only be checked this way here): they pin which files dojo
reads and writes on each version, not what the kernel does with them."""

from __future__ import annotations

from pathlib import Path

import pytest

from dojo.sandbox.cgroups import SlotCgroups, detect
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
