"""`python -m bench.workspace_kept --quick`'s measure, tiny: both columns of every row, on the
session's dev server. Correctness only: no figure here means anything."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bench.workspace_kept import measure, result_rows
from bench.workspace_world import QUICK, clean_up
from overnight.worker.devserver import DevServer

MEASURE_SECONDS = 150


@pytest.mark.timeout(MEASURE_SECONDS + 60)
@pytest.mark.long
@pytest.mark.heavy
async def test_the_workspace_bench_measures_both_columns(
    dev_server: DevServer, tmp_path: Path
) -> None:
    root = tmp_path / "bench"
    root.mkdir()
    try:
        keeps, crashes = await asyncio.wait_for(
            measure(QUICK, root, (dev_server.address, dev_server.namespace)), MEASURE_SECONDS
        )
    finally:
        clean_up(root)
    rows = result_rows(keeps, crashes)
    assert len(rows) == 2 * len(QUICK.sizes_mib) + 3
    for row in rows:
        assert row.baseline is not None and row.overnight is not None, row.metric
        assert row.group == "workspace"
    lost = rows[-2]
    look = rows[-3]
    assert look.unit == "ms" and 0 < (look.overnight or 0) < (look.baseline or 0)
    assert (lost.baseline, lost.overnight) == (QUICK.crash_at, 0)
    assert [c["steps_on_branch"] for c in crashes] == [1, QUICK.steps]
