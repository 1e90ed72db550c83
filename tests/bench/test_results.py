"""bench/results/latest.json holds every benchmark's rows: a benchmark run on its own (the
snapshot-recovery one) adds its rows beside the suite's and keeps theirs, a suite run keeps its
rows, and the docs page's tables are rewritten between their markers. No server: files only."""

from __future__ import annotations

import json
from pathlib import Path

from bench.report import (
    RESULTS_DIR,
    RESULTS_PAGE,
    Row,
    fill_page,
    page_tables,
    read_results,
    save_results,
)
from bench.snapshot_recovery import result_rows

RUNS = [
    {"recovery": "checkpoint", "recovery_seconds": 30.41, "pause_per_capture_seconds": 0.0},
    {"recovery": "snapshot", "recovery_seconds": 0.38, "pause_per_capture_seconds": 0.026},
]


def suite_rows() -> list[Row]:
    rows = [
        Row("crash-to-noticed, median", "s", 25.2, 0.231, "<= 2 s", at_most=2),
        Row("billable actions / supervised hour", "actions", 180, 31.2, ratio_at_most=0.33),
    ]
    rows[0].group, rows[1].group = "crash", "history"
    return rows


def meta(groups: list[str], at: str) -> dict[str, object]:
    return {"command": "python -m bench", "finished_at": at, "metrics": groups}


def test_snapshot_rows_pass_at_five_times_faster() -> None:
    rows = result_rows(RUNS, "local", 30)

    assert [row.group for row in rows] == ["snapshot"] * 3
    assert rows[0].baseline == 30.41 and rows[0].overnight == 0.38 and rows[0].passed
    assert rows[2].overnight == 0.156  # 0.026 s per capture, 6 captures an hour
    slow = result_rows([RUNS[0], RUNS[1] | {"recovery_seconds": 10.0}], "local", 30)
    assert slow[0].passed is False


def test_snapshot_rows_merge_beside_the_suites_and_survive_a_suite_run(tmp_path: Path) -> None:
    page = tmp_path / "performance.md"
    save_results(tmp_path, suite_rows(), {"crash": {}}, meta(["crash", "history"], "t1"), page=page)

    save_results(
        tmp_path,
        result_rows(RUNS, "local", 30),
        {"snapshot_recovery": {}},
        meta(["snapshot"], "t2"),
    )
    written = json.loads((tmp_path / "latest.json").read_text())
    groups = [row["group"] for row in written["rows"]]
    assert groups == ["crash", "history", "snapshot", "snapshot", "snapshot"]
    assert written["meta"]["kept"] == {"crash": "t1", "history": "t1"}
    assert written["meta"]["kept_runs"]["t1"]["command"] == "python -m bench"
    assert set(written["details"]) == {"crash", "snapshot_recovery"}

    # A full suite run measures every suite group, and still keeps the snapshot rows.
    everything = ["crash", "recovery", "history", "scale", "requests"]
    rows, _, _ = save_results(tmp_path, suite_rows(), {}, meta(everything, "t3"))
    assert [row.group for row in rows][-3:] == ["snapshot"] * 3
    assert json.loads((tmp_path / "latest.json").read_text())["meta"]["kept"] == {"snapshot": "t2"}


def test_the_page_tables_are_rewritten_between_their_markers(tmp_path: Path) -> None:
    page = tmp_path / "performance.md"
    page.write_text(
        "# Performance\n\nprose\n\n<!-- generated: results -->\nold\n"
        "<!-- end generated: results -->\n\nmore prose\n\n"
        "<!-- generated: snapshot -->\n<!-- end generated: snapshot -->\n"
    )
    rows = suite_rows() + result_rows(RUNS, "local", 30)
    earlier = {"t1": {"command": "python -m bench", "machine": "2 cores", "wall_seconds": 9}}
    tables = page_tables(
        rows, meta(["snapshot"], "t2") | {"kept": {"crash": "t1"}, "kept_runs": earlier}
    )

    assert fill_page(page, tables) == []
    text = page.read_text()
    results, snapshot = text.split("<!-- generated: snapshot -->")
    assert "old" not in text and "prose" in results and "more prose" in results
    assert "| crash-to-noticed, median | s | 25.2 | 0.231 |" in results
    assert (
        "snapshot recovery" not in results
        and "Rows of crash: `python -m bench`, finished t1 (9 s) on 2 cores" in results
    )
    assert "| snapshot recovery: noticed -> agent working again" in snapshot
    assert "Rows of snapshot: `python -m bench`, finished t2" in snapshot
    # Filled twice, the page is the same: the markers stay and nothing piles up.
    assert fill_page(page, tables) == [] and page.read_text() == text
    assert fill_page(page, {"absent": "x"}) == ["absent"]


def test_the_docs_page_shows_what_latest_json_holds() -> None:
    """docs/performance.md's tables are bench/results/latest.json's rows, not edited by hand
    (`python -c "from bench.report import refresh_page; refresh_page()"` rewrites them)."""
    text = RESULTS_PAGE.read_text()
    rows, meta = read_results(RESULTS_DIR)
    assert {row.group for row in rows} >= {"crash", "history", "scale", "requests", "snapshot"}
    for name, table in page_tables(rows, meta).items():
        assert f"<!-- generated: {name} -->\n\n{table}\n\n<!-- end generated: {name} -->" in text
