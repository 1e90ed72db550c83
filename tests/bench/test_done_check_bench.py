"""`python -m bench.done_check_cost --quick`'s measure, tiny: both columns of every row, on both
providers (the fake Runtime API for runtime). Correctness only: no figure here means anything."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bench.done_check_cost import QUICK, clean_up, measure_all, result_rows

MEASURE_SECONDS = 150


@pytest.mark.timeout(MEASURE_SECONDS + 60)
async def test_the_done_check_bench_measures_both_columns(tmp_path: Path) -> None:
    root = tmp_path / "bench"
    root.mkdir()
    try:
        found = await asyncio.wait_for(measure_all(QUICK, root), MEASURE_SECONDS)
    finally:
        clean_up(root)
    rows = result_rows(found, QUICK)
    assert [row.unit for row in rows] == ["s", "s", "sandboxes", "requests"]
    for row in rows:
        assert row.baseline is not None and row.overnight is not None, row.metric
        assert row.group == "donecheck"
    # One sandbox a round on Runtime for the fresh check, none in place.
    assert (rows[2].baseline, rows[2].overnight) == (0, 1)
