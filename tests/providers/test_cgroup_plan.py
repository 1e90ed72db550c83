"""Where a sandbox's cgroup goes: the hierarchies read from mountinfo and /proc/self/cgroup
(hybrid, pure v2, a container's part of a hierarchy), and a systemd slice's name."""

from __future__ import annotations

from pathlib import Path

import pytest

from activities.providers.local import cgroup_plan
from activities.providers.local.cgroup_plan import Mount, cgroup_name, mounts, own_path

HYBRID = """\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""
HYBRID_SELF = """\
8:pids:/
6:freezer:/
4:memory:/process_api/b18
0::/
"""


def test_a_hybrid_hosts_hierarchies_and_this_process_in_each() -> None:
    found = {m.point: m for m in mounts(HYBRID)}
    assert sorted(found) == [
        "/sys/fs/cgroup/freezer",
        "/sys/fs/cgroup/memory",
        "/sys/fs/cgroup/pids",
        "/sys/fs/cgroup/unified",
    ]
    assert found["/sys/fs/cgroup/unified"].fs == "cgroup2"
    assert "freezer" in found["/sys/fs/cgroup/freezer"].controllers
    assert own_path(found["/sys/fs/cgroup/memory"], HYBRID_SELF) == "/process_api/b18"
    assert own_path(found["/sys/fs/cgroup/unified"], HYBRID_SELF) == "/"


def test_a_pure_v2_host_and_a_containers_part_of_a_hierarchy() -> None:
    line = "30 24 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate"
    (v2,) = mounts(line)
    assert own_path(v2, "0::/system.slice/overnight.service\n") == "/system.slice/overnight.service"
    # A container shown /docker/abc of the hierarchy sees it as its top.
    part = Mount("cgroup", "/sys/fs/cgroup/pids", "/docker/abc", frozenset({"pids"}))
    assert own_path(part, "3:pids:/docker/abc/worker\n") == "/worker"
    assert own_path(part, "3:pids:/elsewhere\n") == "/"


def test_names_are_the_sandboxs_own_per_home_and_slices_are_escaped(tmp_path: Path) -> None:
    one, two = cgroup_name("run-1", tmp_path / "a"), cgroup_name("run-1", tmp_path / "b")
    assert one.startswith("run-1.") and one != two
    # A dash nests slices in systemd: escaped, the sandbox's slice is one under overnight.slice.
    assert cgroup_plan.slice_name("run-1.ab") == "overnight-run\\x2d1.ab.slice"


def test_the_workers_setting_names_a_kind(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(cgroup_plan.CGROUPS_ENV, "cgroup3")
    with pytest.raises(ValueError, match="OVERNIGHT_SANDBOX_CGROUPS"):
        cgroup_plan.choice()
    monkeypatch.setenv(cgroup_plan.CGROUPS_ENV, "none")
    assert cgroup_plan.plan("x", Path("/tmp"), vcpu=1, memory_mib=64, processes=8).freezer == "none"
