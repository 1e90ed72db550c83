"""The benchmark's results: rows with a target, percentiles, the printed table and the files,
and the tables of the docs page that shows them (docs/performance.md, between markers)."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

# The suite's benchmarks (`python -m bench --only NAME`), in the table's order.
SUITE = ("crash", "recovery", "history", "scale", "requests", "fleet")
# Every group a row may carry: the suite's, then the benchmarks run on their own
# (`python -m bench.snapshot_recovery`), whose rows a suite run keeps.
GROUPS = (
    *SUITE,
    "snapshot",
    "network",
    "codec",
    "metrics",
    "localwatch",
    "disk",
    "codingagents",
    "hosts",
    "workspace",
    "donecheck",
    "gateway",
    "modelroutes",
    "mutation",
    "console",
)
REPO_ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = REPO_ROOT / "bench" / "results"
# The docs page showing bench/results' rows: its tables are rewritten, between markers.
RESULTS_PAGE = REPO_ROOT / "docs" / "performance.md"


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
    # The benchmark (`--only` name) that measured it: a partial run keeps the others' rows.
    group: str = ""

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

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> Row:
        names = {field.name for field in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in value.items() if k in names})


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


def render_markdown(rows: Sequence[Row], *, notes: bool = True) -> str:
    lines = ["| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    lines += ["| " + " | ".join(_cells(row)) + " |" for row in rows]
    noted = [f"- **{row.metric}**: {row.note}" for row in rows if row.note] if notes else []
    return "\n".join(lines + ([""] + noted if noted else []))


# What the table says of the run that measured a row.
RUN_KEYS = ("command", "machine", "wall_seconds")


def merge_earlier(
    folder: Path,
    rows: list[Row],
    details: dict[str, Any],
    meta: dict[str, Any],
    order: Sequence[str],
) -> list[Row]:
    """The rows of this run, plus those of benchmarks it did not run from `folder`'s last
    results (a run of `--only X` refreshes X's rows and keeps the rest), in `order` of group.
    Their details are kept too, `meta["kept"]` says which run each kept group is from (when it
    finished), and `meta["kept_runs"]` what those runs were (command, machine, length)."""
    try:
        earlier = json.loads((folder / "latest.json").read_text())
    except (OSError, ValueError):
        earlier = {}
    ran = set(meta.get("metrics", []))
    before = earlier.get("meta", {})
    kept_from: dict[str, Any] = dict(before.get("kept", {}))
    kept: list[Row] = []
    for value in earlier.get("rows", []):
        row = Row.from_json(value)
        row.group = row.group or _group_of(row.metric)
        if row.group not in ran:
            kept.append(row)
            kept_from.setdefault(row.group, before.get("finished_at"))
    meta["kept"] = {group: at for group, at in kept_from.items() if group not in ran}
    runs: dict[str, Any] = dict(before.get("kept_runs", {}))
    if before.get("finished_at"):
        runs.setdefault(before["finished_at"], {key: before.get(key) for key in RUN_KEYS})
    meta["kept_runs"] = {at: run for at, run in runs.items() if at in meta["kept"].values()}
    for name, value in earlier.get("details", {}).items():
        details.setdefault(name, value)
    rank = {group: i for i, group in enumerate(order)}
    return sorted(rows + kept, key=lambda row: rank.get(row.group, len(rank)))


def _group_of(metric: str) -> str:
    """The group of a row written before rows carried one."""
    if "recovery" in metric:
        return "recovery"
    if "crash" in metric:
        return "crash"
    if "history" in metric or "billable" in metric:
        return "history"
    return "scale"


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
    kept = meta.get("kept") or {}
    if kept:
        header += (
            "Rows kept from earlier runs: "
            + ", ".join(f"{group} ({at})" for group, at in sorted(kept.items()))
            + ".\n\n"
        )
    md_path.write_text(header + render_markdown(rows) + "\n")
    return json_path, md_path


# The docs page's generated parts: `<!-- generated: NAME -->` ... `<!-- end generated: NAME -->`.
# Everything between a pair is rewritten; the prose around it is the page's own.
PAGE_TABLES = {
    # name: the groups whose rows it shows (None: every group no other table names)
    "results": None,
    "snapshot": ("snapshot",),
}
# Groups another page shows (their benchmark writes it): mutation testing's score is in
# docs/reliability.md (bench/mutation.py).
SHOWN_ELSEWHERE = ("mutation",)


def page_tables(rows: Sequence[Row], meta: dict[str, Any]) -> dict[str, str]:
    """Each generated table of the docs page: its rows (notes stay in latest.md, they are long)
    and a line saying which run measured them, since a partial run keeps earlier rows."""
    named = {group for groups in PAGE_TABLES.values() if groups for group in groups}
    named.update(SHOWN_ELSEWHERE)
    tables = {}
    for name, groups in PAGE_TABLES.items():
        chosen = [
            row for row in rows if (row.group in groups if groups else row.group not in named)
        ]
        tables[name] = render_markdown(chosen, notes=False) + "\n\n" + _measured(chosen, meta)
    return tables


def _measured(rows: Sequence[Row], meta: dict[str, Any]) -> str:
    ran = set(meta.get("metrics", []))
    kept, kept_runs = meta.get("kept") or {}, meta.get("kept_runs") or {}
    by_run: dict[str, list[str]] = {}
    for group in dict.fromkeys(row.group for row in rows):
        at = meta.get("finished_at") if group in ran else kept.get(group)
        by_run.setdefault(str(at or "?"), []).append(group)
    parts = []
    for at, groups in by_run.items():
        run = meta if at == str(meta.get("finished_at")) else kept_runs.get(at)
        said = f"rows of {', '.join(groups)}: "
        if run:
            said += (
                f"`{run.get('command', '')}`, finished {at} ({run.get('wall_seconds', '?')} s) "
                f"on {run.get('machine', '?')}"
            )
        else:
            said += f"a run finished {at}"
        parts.append(said)
    if not parts:
        return "No rows yet: run the benchmark."
    said = "; ".join(parts)
    return (
        "Generated from `bench/results/latest.json` by the benchmark; do not edit. "
        f"{said[0].upper()}{said[1:]}."
    )


def read_results(folder: Path) -> tuple[list[Row], dict[str, Any]]:
    """The rows and meta of `folder`'s latest.json (none when there is no such file)."""
    try:
        document = json.loads((folder / "latest.json").read_text())
    except OSError:
        return [], {}
    return [Row.from_json(value) for value in document.get("rows", [])], document.get("meta", {})


def fill_page(page: Path, tables: dict[str, str]) -> list[str]:
    """Rewrite each table between its markers in `page`; the names whose markers are missing
    (their tables are left out, the rest is written)."""
    text = page.read_text()
    missing = []
    for name, table in tables.items():
        begin, end = f"<!-- generated: {name} -->", f"<!-- end generated: {name} -->"
        head, found, rest = text.partition(begin)
        _, found_end, tail = rest.partition(end)
        if not (found and found_end):
            missing.append(name)
            continue
        # Blank lines around: Markdown would take a table touching the comment as HTML.
        text = f"{head}{begin}\n\n{table}\n\n{end}{tail}"
    page.write_text(text)
    return missing


def save_results(
    folder: Path,
    rows: list[Row],
    details: dict[str, Any],
    meta: dict[str, Any],
    out: Callable[[str], None] = print,
    page: Path = RESULTS_PAGE,
) -> tuple[list[Row], Path, Path]:
    """Write this run's rows to `folder`, keeping the rows of the benchmarks it did not run
    from the folder's last results; the rows written, and the two files. Into bench/results
    (not a quick run's folder) the docs page's tables are rewritten too, so they show what
    latest.json holds."""
    rows = merge_earlier(folder, rows, details, meta, GROUPS)
    json_path, md_path = write_results(folder, rows, details, meta)
    if folder.resolve() == RESULTS_DIR:
        missing = fill_page(page, page_tables(rows, meta))
        out(f"rewrote the tables in {page}")
        if missing:
            out(f"warning: {page} has no markers for {', '.join(missing)}: not written")
    return rows, json_path, md_path


def finish(
    folder: Path,
    rows: list[Row],
    details: dict[str, Any],
    *,
    command: str,
    started_at: datetime,
    began: float,
    metrics: list[str],
) -> int:
    """A benchmark's end: its rows and details saved with what it ran and when
    (`save_results`), its table printed; 0 when no row failed its target. `began`: its
    `time.monotonic()` at the start, for the wall time."""
    meta = {
        "command": command,
        "machine": machine(),
        "started_at": started_at.isoformat(timespec="seconds"),
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "wall_seconds": round(time.monotonic() - began),
        "metrics": metrics,
    }
    _, json_path, _ = save_results(folder, rows, details, meta)
    print(render_text(rows))
    print(f"wrote {json_path}")
    return 0 if all(row.passed is not False for row in rows) else 1


def refresh_page(folder: Path = RESULTS_DIR, page: Path = RESULTS_PAGE) -> list[str]:
    """Rewrite the docs page's tables from `folder`'s latest.json, measuring nothing (after
    the page's prose was edited, say); the names of the tables it has no markers for."""
    rows, meta = read_results(folder)
    return fill_page(page, page_tables(rows, meta))


def machine() -> str:
    """The cores, CPU model, memory and Python the figures were measured with."""
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (
        f"{os.cpu_count()} cores ({model or platform.machine()}), {memory:.0f} GiB, "
        f"Python {sys.version.split()[0]}"
    )


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
