"""`python -m bench.console`, tiny: every row is measured, and the shared source's requests
are fewer than the naive view's. Correctness only: a few runs, short windows."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bench.console import Plan, console_rows, measure

MEASURE_SECONDS = 240


@pytest.mark.timeout(MEASURE_SECONDS + 120)
@pytest.mark.long
@pytest.mark.heavy
async def test_the_console_bench_measures_the_list_and_both_views_requests(
    tmp_path: Path,
) -> None:
    # 6 s: three of the shared source's 2 s polls; in a 4 s window a loaded machine's slow
    # poll could leave no request counted (0 < console_per_minute fails).
    plan = Plan(levels=(10, 30), samples=2, window=6.0)
    found = await asyncio.wait_for(measure(plan, tmp_path), MEASURE_SECONDS)
    rows = console_rows(found)
    assert [row.metric for row in rows][-1].startswith("console Temporal requests per minute")
    for row in rows:
        assert row.overnight is not None and row.group == "console", row.metric
    assert found.page_bytes[30] > found.page_bytes[10]
    assert 0 < found.console_per_minute < found.naive_per_minute
