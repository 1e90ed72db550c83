"""The local-watch benchmark's rows, from its measured cells (the run itself is
`python -m bench.local_watch`, minutes long: not a test)."""

from __future__ import annotations

from bench.local_watch import GROUP, rows


def found(overnight_cpu: float, baseline_cpu: float) -> dict[str, object]:
    def cell(cpu: float, rss: float) -> dict[str, float]:
        return {
            "runs_up": 30,
            "cpu_per_thousand_percent": cpu,
            "rss_per_thousand_mib": rss,
            "idle_rss_mib": 80.0,
        }

    return {
        "settings": {"window": 180.0, "poll_seconds": 60.0},
        "cells": {"overnight": cell(overnight_cpu, 300.0), "baseline": cell(baseline_cpu, 320.0)},
    }


def test_the_cpu_row_passes_at_or_below_the_naive_port_and_fails_above() -> None:
    cpu, rss = rows(found(9.0, 12.0))
    assert (cpu.baseline, cpu.overnight, cpu.passed) == (12.0, 9.0, True)
    assert (rss.baseline, rss.overnight, rss.passed) == (320.0, 300.0, None)
    assert {cpu.group, rss.group} == {GROUP}
    slower, _ = rows(found(13.0, 12.0))
    assert slower.passed is False
