"""`python -m bench.model_routes --quick`: the fake model API and a real gateway in processes
of their own, tiny sizes. Correctness only, no figure here means anything: every row is
measured with its baseline from the same run, every call through the gateway is answered, and
the spend booked is the scripted usage at the price table."""

from __future__ import annotations

import json
from pathlib import Path

from bench.model_routes import GROUP, main


def test_the_quick_model_routes_bench_measures_every_row_against_its_baseline(
    tmp_path: Path,
) -> None:
    main(["--quick", "--results", str(tmp_path)])  # FAILs at these sizes say nothing

    written = json.loads((tmp_path / "latest.json").read_text())
    rows = written["rows"]
    assert {row["group"] for row in rows} == {GROUP}
    for row in rows:
        assert row["overnight"] is not None and row["overnight"] > 0, row["metric"]
        assert row["baseline"] is not None or "CPU" in row["metric"], row["metric"]
    details = written["details"]["model_routes"]
    for seen in details["latency"].values():
        assert seen["gateway"]["failed"] == 0 and seen["gateway"]["count"] > 0
    assert details["booked_answers"] == details["gateway_requests"]
    assert abs(details["booked_usd"] - details["scripted_usd"]) < 1e-6
