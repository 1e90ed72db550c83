"""What `overnight reap`, `overnight disk` and `logs` on a deleted sandbox say, plainly."""

from __future__ import annotations

from datetime import UTC, datetime

from activities.models import SandboxInfo
from activities.providers.disk import DiskUsage, SandboxDisk, SnapshotDisk
from overnight.cli import disk as disk_cli
from overnight.cli.render import reaped_text, size_text
from overnight.cli.run_view import deleted_text
from overnight.core.constants import LABEL_ATTEMPT, LABEL_KEEP_UNTIL, LABEL_RUN
from overnight.worker.reap_entries import ReapedSandbox

MIB = 1024 * 1024
UNTIL = "20261204T031500Z"


def test_reap_says_what_it_took_why_and_the_disk_it_freed() -> None:
    reaped = [
        ReapedSandbox(
            provider="local",
            sandbox_id="r-1",
            run_id="r",
            was="paused",
            stopped=True,
            why="its retention ended 2026-12-04 03:15 UTC",
            freed_bytes=212 * MIB,
        ),
        ReapedSandbox(
            provider="runtime",
            sandbox_id="s-2",
            run_id="s",
            was="running",
            stopped=True,
            why="its run is closed and nobody supervises it",
        ),
        ReapedSandbox(
            provider="local",
            sandbox_id="t-1.18f2a",
            run_id="",
            was="half deleted",
            stopped=True,
            kind="trash",
            why="a delete cut short (a killed worker) finished",
            freed_bytes=3 * MIB,
        ),
        ReapedSandbox(
            provider="local",
            sandbox_id="u-1",
            run_id="u",
            was="paused",
            stopped=False,
            detail="OSError: busy",
        ),
    ]
    assert reaped_text(reaped).splitlines() == [
        "local sandbox r-1 of r: deleted: its retention ended 2026-12-04 03:15 UTC; "
        "freed 212.0 MiB",
        "runtime sandbox s-2 of s: stopped (a stopped sandbox keeps nothing): its run is closed "
        "and nobody supervises it",
        "local trash t-1.18f2a: deleted: a delete cut short (a killed worker) finished; "
        "freed 3.0 MiB",
        "local sandbox u-1 of u: could not delete (OSError: busy)",
        "reaped 2 sandboxes; freed 215.0 MiB of this machine's disk",
    ]
    assert reaped_text([]) == "nothing to reap"
    assert [size_text(n) for n in (0, 1023, 1536, 5 * MIB, 3 * 1024 * MIB)] == [
        "0 B",
        "1023 B",
        "1.5 KiB",
        "5.0 MiB",
        "3.0 GiB",
    ]


def test_disk_shows_each_sandbox_holding_files_and_what_deleted_ones_keep() -> None:
    run = {LABEL_RUN: "r", LABEL_ATTEMPT: "1"}
    usage = DiskUsage(
        root="/home/me/.overnight",
        sandboxes=[
            SandboxDisk("r-1", "paused", 200 * MIB, {**run, LABEL_KEEP_UNTIL: UNTIL}),
            SandboxDisk(
                "r-2",
                "stopped",
                8192,
                {**run, LABEL_ATTEMPT: "2"},
                deleted_at=datetime(2026, 12, 1, tzinfo=UTC),
                freed_bytes=190 * MIB,
            ),
            SandboxDisk("q-1", "running", 10 * MIB, {LABEL_RUN: "q", LABEL_ATTEMPT: "1"}),
        ],
        snapshots=[SnapshotDisk("snap-1", 5 * MIB, {LABEL_RUN: "r"})],
        trash_bytes=MIB,
        free_bytes=40 * 1024 * MIB,
        total_bytes=100 * 1024 * MIB,
    )
    assert disk_cli.text(usage).splitlines() == [
        "overnight's local disk: /home/me/.overnight (its filesystem has 40.0 GiB free of "
        "100.0 GiB)",
        "sandboxes: 210.0 MiB in 2 (1 running, 1 paused)",
        "  r-1  paused    200.0 MiB  run r, attempt 1: kept for a look until 2026-12-04 03:15 UTC "
        "(then overnight reap)",
        "  q-1  running    10.0 MiB  run q, attempt 1",
        "deleted sandboxes: 1 keep 8.0 KiB of records and last words (they held 190.0 MiB)",
        "snapshots: 5.0 MiB in 1",
        "  snap-1     5.0 MiB  run r",
        "half deleted: 1.0 MiB (a delete cut short; overnight reap finishes it)",
    ]


def test_a_deleted_sandbox_says_when_and_why_it_went() -> None:
    kept = SandboxInfo(sandbox_id="r-1", state="paused", labels={LABEL_KEEP_UNTIL: UNTIL})
    at_end = kept.model_copy(
        update={"state": "stopped", "deleted_at": datetime(2026, 12, 4, 9, 0, tzinfo=UTC)}
    )
    assert deleted_text(kept, at_end, 1) == (
        "sandbox r-1 (attempt 1) was deleted on 2026-12-04 09:00 UTC at the end of its retention "
        "(it was kept for a look until 2026-12-04 03:15 UTC): its files and its full output are "
        "gone"
    )
    early = at_end.model_copy(update={"deleted_at": datetime(2026, 12, 2, tzinfo=UTC)})
    assert (
        "before its retention ended (2026-12-04 03:15 UTC): by a person, or overnight reap "
        "--paused" in deleted_text(kept, early, 1)
    )
    finished = SandboxInfo(
        sandbox_id="r-2", state="stopped", deleted_at=datetime(2026, 12, 1, tzinfo=UTC)
    )
    assert deleted_text(finished, finished, 2) == (
        "sandbox r-2 (attempt 2) was deleted on 2026-12-01 00:00 UTC when it stopped (a stopped "
        "sandbox keeps nothing, as on Runtime): its files and its full output are gone"
    )
