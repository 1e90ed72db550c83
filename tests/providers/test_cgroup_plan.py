"""Where a sandbox's cgroup goes: the hierarchies read from mountinfo and /proc/self/cgroup
(hybrid, pure v2, a container's part of a hierarchy), and a systemd slice's name."""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from activities.providers.local import cgroup_layout, cgroup_plan, cgroup_systemd, cgroups
from activities.providers.local.cgroup_mounts import Mount, mounts, own_path
from activities.providers.local.cgroup_plan import cgroup_name
from tests.waits import CAP

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
    assert cgroup_systemd.slice_name("run-1.ab") == "overnight-run\\x2d1.ab.slice"


def test_the_workers_setting_names_a_kind(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(cgroup_layout.CGROUPS_ENV, "cgroup3")
    with pytest.raises(ValueError, match="OVERNIGHT_SANDBOX_CGROUPS"):
        cgroup_layout.choice()
    monkeypatch.setenv(cgroup_layout.CGROUPS_ENV, "none")
    assert cgroup_plan.plan("x", Path("/tmp"), vcpu=1, memory_mib=64, processes=8).freezer == "none"


FAKE_SYSTEMCTL = """#!/bin/sh
# A stand-in for the user's systemd: slices are folders under $FAKE_SLICES (cgroup v2).
[ "$1" = --user ] && shift
case $1 in
  start) mkdir -p "$FAKE_SLICES/$2" ;;
  set-property) echo "$@" >> "$FAKE_LOG" ;;
  show) echo "${FAKE_SLICES#$FAKE_MOUNT}/$5" ;;
  stop) for d in "$FAKE_SLICES/$2"/*/; do [ -d "$d" ] && rmdir "$d"; done
        rmdir "$FAKE_SLICES/$2" ;;
esac
"""
FAKE_SYSTEMD_RUN = """#!/bin/sh
# A scope of the slice: a folder of its own, joined, then the command.
while [ "$1" != -- ]; do case $1 in --slice=*) slice=${1#--slice=} ;; esac; shift; done
shift
scope="$FAKE_SLICES/$slice/run-$$.scope"
mkdir "$scope" && echo $$ > "$scope/cgroup.procs"
exec "$@"
"""


def test_a_systemd_slice_is_limited_joined_frozen_and_killed_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The systemd kind's plumbing against stand-ins of systemctl and systemd-run on a real
    cgroup v2 hierarchy (a real user manager cannot be had here)."""
    v2 = next((m for m in mounts() if m.fs == "cgroup2"), None)
    if v2 is None or not os.access(v2.point, os.W_OK):
        pytest.skip("needs a writable cgroup v2 hierarchy")
    slices = Path(v2.point, f"overnight-fake-{uuid.uuid4().hex[:8]}")
    slices.mkdir()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("systemctl", FAKE_SYSTEMCTL), ("systemd-run", FAKE_SYSTEMD_RUN)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SLICES", str(slices))
    monkeypatch.setenv("FAKE_MOUNT", v2.point)
    monkeypatch.setenv("FAKE_LOG", str(tmp_path / "properties"))
    try:
        made = cgroup_plan._systemd_plan("sb-1.abc", vcpu=2, memory_mib=512, processes=64)
        assert made.freezer == "systemd" and made.systemd_slice == "overnight-sb\\x2d1.abc.slice"
        assert made.cgroup == str(slices / made.systemd_slice) and made.limited
        assert "TasksMax=64" in (tmp_path / "properties").read_text()
        prefix = cgroups.join_prefix(list(made.joins), made.systemd_slice)
        sleeper = subprocess.Popen([*prefix, "sleep", "30"])
        assert _until(lambda: cgroups.members(made.cgroup or "", below=True) == {sleeper.pid})

        cgroups.freeze("systemd", made.cgroup or "")
        assert cgroups.frozen("systemd", made.cgroup or "")
        assert cgroups.kill("systemd", made.cgroup or "", list(made.joins))
        assert sleeper.wait(timeout=CAP) == -9
        assert cgroup_plan.discard("systemd", made.joins, made.systemd_slice)
        assert not Path(made.cgroup or "").exists()
    finally:
        for folder in sorted(slices.glob("**/"), reverse=True):
            folder.rmdir()


def _until(check: Callable[[], bool], timeout: float = CAP) -> bool:
    give_up = time.monotonic() + timeout
    while not check():
        if time.monotonic() > give_up:
            return False
        time.sleep(0.02)
    return True
