"""The benchmark's results: rows with a target, percentiles, the printed table and the files."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any


@dataclass
class Row:
    """One line of the table. A row with no bound is for context only (no pass/fail)."""

    metric: str
    unit: str
    baseline: float | None
    overnight: float | None
    target: str = ""
    at_most: float | None = None
    at_least: float | None = None
    ratio_at_most: float | None = None
    note: str = ""

    @property
    def ratio(self) -> float | None:
        if self.baseline is None or self.overnight is None or self.baseline == 0:
            return None
        return self.overnight / self.baseline

    @property
    def passed(self) -> bool | None:
        checks: list[bool] = []
        if self.at_most is not None:
            checks.append(self.overnight is not None and self.overnight <= self.at_most)
        if self.at_least is not None:
            checks.append(self.overnight is not None and self.overnight >= self.at_least)
        if self.ratio_at_most is not None:
            ratio = self.ratio
            checks.append(ratio is not None and ratio <= self.ratio_at_most)
        return all(checks) if checks else None

    def as_json(self) -> dict[str, Any]:
        return asdict(self) | {"ratio": _round(self.ratio), "passed": self.passed}


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100), linear between closest ranks; inf for no values."""
    if not values:
        return math.inf
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def summarize(values: Sequence[float]) -> dict[str, float | int | None]:
    return {
        "n": len(values),
        "median": _round(percentile(values, 50)),
        "p95": _round(percentile(values, 95)),
        "p99": _round(percentile(values, 99)),
        "min": _round(min(values)) if values else None,
        "max": _round(max(values)) if values else None,
    }


HEADERS = ("metric", "unit", "baseline", "overnight", "ratio", "target", "result")


def _cells(row: Row) -> tuple[str, ...]:
    verdict = {True: "pass", False: "FAIL", None: "-"}[row.passed]
    ratio = row.ratio
    return (
        row.metric,
        row.unit,
        _fmt(row.baseline),
        _fmt(row.overnight),
        "-" if ratio is None else f"{ratio:.3g}",
        row.target or "-",
        verdict,
    )


def render_text(rows: Sequence[Row]) -> str:
    table = [HEADERS, *(_cells(row) for row in rows)]
    widths = [max(len(line[i]) for line in table) for i in range(len(HEADERS))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True))
        for line in table
    ]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


def render_markdown(rows: Sequence[Row]) -> str:
    lines = ["| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    lines += ["| " + " | ".join(_cells(row)) + " |" for row in rows]
    notes = [f"- **{row.metric}**: {row.note}" for row in rows if row.note]
    return "\n".join(lines + ([""] + notes if notes else []))


def write_results(
    folder: Path, rows: Sequence[Row], details: dict[str, Any], meta: dict[str, Any]
) -> tuple[Path, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    json_path, md_path = folder / "latest.json", folder / "latest.md"
    document = {"meta": meta, "rows": [row.as_json() for row in rows], "details": details}
    json_path.write_text(json.dumps(document, indent=2, default=str) + "\n")
    header = (
        f"# overnight benchmarks\n\n{meta.get('command', '')} on {meta.get('machine', '')}, "
        f"{meta.get('finished_at', '')}; {meta.get('wall_seconds', '?')} s.\n\n"
    )
    md_path.write_text(header + render_markdown(rows) + "\n")
    return json_path, md_path


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    if math.isinf(value):
        return "inf"
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:.3g}" if abs(value) < 100 else f"{value:,.0f}"


def _round(value: float | None) -> float | None:
    if value is None or math.isinf(value) or math.isnan(value):
        return None
    return round(value, 4)
