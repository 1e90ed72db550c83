"""`python -m bench.dev_server_journal`, tiny: both journals are measured on real dev servers
(no figure here means anything)."""

from __future__ import annotations

import pytest

from bench.dev_server_journal import Load, rows


@pytest.mark.timeout(240)
async def test_the_journal_bench_measures_both_dev_servers() -> None:
    found = await rows(Load(runs=2, steps=3))
    assert [row.group for row in found] == ["dev_server_journal"] * 2
    for row in found:
        assert row.baseline is not None and row.baseline > 0
        assert row.overnight is not None and row.overnight > 0
