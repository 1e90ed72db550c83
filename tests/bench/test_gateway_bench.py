"""`python -m bench.sandbox_gateway --quick`: real bubblewrap sandboxes and a real gateway,
tiny sizes (2 start-ups of each kind, a 4 MB file, 3 sandboxes for 1 s). Correctness only,
no figure here means anything: every row is measured with its baseline, every request
through the gateway is answered, the rows are written; and the start-up row's bound is the
issue's (50 ms)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from bench.gateway_measure import Phase
from bench.sandbox_gateway import GROUP, QUICK, main, result_rows

needs_sandboxes = pytest.mark.skipif(
    any(shutil.which(tool) is None for tool in ("bwrap", "curl", "slirp4netns")),
    reason="needs bubblewrap, slirp4netns and curl",
)


@needs_sandboxes
def test_the_quick_gateway_bench_measures_every_row_against_its_baseline(tmp_path: Path) -> None:
    main(["--quick", "--results", str(tmp_path)])  # FAILs at these sizes say nothing

    written = json.loads((tmp_path / "latest.json").read_text())
    rows = written["rows"]
    assert {row["group"] for row in rows} == {GROUP}
    assert written["meta"]["metrics"] == [GROUP]
    for row in rows:
        assert row["overnight"] is not None and row["overnight"] > 0, row["metric"]
        # Every row has its baseline from the same run, but the gateway's own CPU.
        assert row["baseline"] is not None or "CPU" in row["metric"], row["metric"]
    details = written["details"]["sandbox_gateway"]
    assert set(details["startup"]) == {"slirp4netns", "gateway"}
    assert len(details["startup"]["gateway"]["agent"]) == QUICK.samples
    assert {"host", "relay", "gateway"} <= set(details["download"]["mb_per_second"])
    for mode in ("direct", "proxy"):
        phase = details["load"][mode]
        assert phase["requests"] > 0 and phase["failed"] == 0, phase
    assert "| metric |" in (tmp_path / "latest.md").read_text()


def _found(slirp_agent: float, gateway_agent: float, gateway_mb: float) -> dict[str, Any]:
    """Measured cells: one sample of each start-up, the download's speeds, two windows."""
    cpu = {"window": 1.0, "gateway_process": 0.1, "relays": 0.1, "server": 0.1, "machine": 1.0}
    return {
        "startup": {
            kind: {"create": [0.1], "first_command": [0.3], "agent": [agent]}
            for kind, agent in (("slirp4netns", slirp_agent), ("gateway", gateway_agent))
        },
        "download": {
            "mb_per_second": {"host": 900.0, "relay": 500.0, "gateway": gateway_mb},
            "cpu_seconds": {"relay": {"relays": 0.05}, "gateway": {"gateway": 0.1, "relays": 0.05}},
        },
        "load": {
            mode: Phase(mode, 3, 1.0, 10, 0, {}, 1.0, 2.0, cpu) for mode in ("direct", "proxy")
        },
    }


def _passed(found: dict[str, Any], words: str) -> list[bool | None]:
    return [row.passed for row in result_rows(found, QUICK) if words in row.metric]


def test_start_up_fails_past_50_ms_added_and_a_download_below_four_fifths_of_the_relays() -> None:
    assert _passed(_found(0.2, 0.24, 420.0), "an agent's start") == [True, True]
    assert _passed(_found(0.2, 0.26, 420.0), "an agent's start") == [False, False]
    assert _passed(_found(0.2, 0.24, 420.0), "sandbox's relay alone") == [True]
    assert _passed(_found(0.2, 0.24, 380.0), "sandbox's relay alone") == [False]
