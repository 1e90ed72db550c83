"""`overnight disk` says each sandbox's disk limit, and what its image holds inside, after what
it shows already (the size first is what it holds on this disk: an image as its file)."""

from __future__ import annotations

from activities.providers.disk import DiskUsage, SandboxDisk
from overnight.cli import disk as disk_cli
from overnight.core.constants import LABEL_ATTEMPT, LABEL_RUN

MIB = 1024 * 1024


def _usage(*boxes: SandboxDisk) -> DiskUsage:
    return DiskUsage("/home/me/.overnight", list(boxes), [], 0, 40_000 * MIB, 90_000 * MIB)


def test_a_sandbox_on_its_own_image_shows_what_is_used_of_its_disk() -> None:
    box = SandboxDisk(
        "img-1",
        "running",
        212 * MIB,
        {LABEL_RUN: "img", LABEL_ATTEMPT: "1"},
        limit_bytes=16384 * MIB,
        used_bytes=208 * MIB,
    )
    (line,) = [ln for ln in disk_cli.text(_usage(box)).splitlines() if "img-1" in ln]
    assert line.endswith("run img, attempt 1; 208.0 MiB used of a 16.0 GiB disk"), line


def test_a_measured_sandbox_shows_its_limit_and_one_made_before_limits_nothing() -> None:
    measured = SandboxDisk("m-1", "paused", 3 * MIB, {LABEL_RUN: "m"}, limit_bytes=64 * MIB)
    old = SandboxDisk("o-1", "paused", 3 * MIB, {LABEL_RUN: "o"})
    shown = disk_cli.text(_usage(measured, old))
    assert "; a 64.0 MiB disk" in shown
    (line,) = [ln for ln in shown.splitlines() if "o-1" in ln]
    assert "disk" not in line.split("run o")[1]
    assert disk_cli._json(_usage(measured))["sandboxes"][0]["limit_bytes"] == 64 * MIB
