"""`python -m bench.codec`, tiny: both columns (codec off, codec on) of every row are measured.

Correctness only: one crash sample and one 1-hour healthy run per mode, so no figure means
anything here.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bench.codec import CodecPlan, codec_rows, measure
from overnight.worker.devserver import DevServer

# Its own bound, under the test's: cancelled, the bench still stops its workers and sandboxes
# (pytest-timeout's would end the event loop with them running, for the next test to find).
MEASURE_SECONDS = 240


@pytest.mark.timeout(MEASURE_SECONDS + 180)
@pytest.mark.long
@pytest.mark.heavy
async def test_the_codec_bench_measures_both_modes(dev_server: DevServer, tmp_path: Path) -> None:
    plan = CodecPlan(samples=1, poll_seconds=2, hours=1, repeats=1)
    found = await asyncio.wait_for(
        measure(plan, tmp_path, address=dev_server.address), MEASURE_SECONDS
    )
    assert [s.seconds is not None for s in found.samples] == [True, True]
    rows = codec_rows(found)
    assert [row.metric for row in rows][:3] == [
        "billable actions / supervised hour: codec on vs off",
        "history bytes / supervised hour: codec on vs off",
        "crash-to-noticed, median: codec on vs off",
    ]
    for row in rows:
        assert row.baseline is not None and row.overnight is not None, row.metric
        assert row.group == "codec"
    # Encrypted payloads are larger; the run itself is the same.
    assert rows[1].overnight > rows[1].baseline
