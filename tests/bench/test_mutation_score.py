"""The mutation score `bash scripts/mutation` prints and records (bench/mutation_score.py,
bench/mutation.py): equivalent survivors are left out of it, every other mutant counts, and the
run fails on a mutant neither caught nor listed, on a stale list, and on a module or a whole
below its bar; the record is rows of its own group and docs/reliability.md's table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.mutation import GROUP, SCORE_PAGE, details_of, page_table, result_rows
from bench.mutation_score import (
    SURVIVORS_FILE,
    Listed,
    judge,
    module_of,
    mutated_modules,
    read_fates,
    read_listed,
)
from bench.report import RESULTS_DIR, read_results, save_results


def fates_of(module: str, *fates: str) -> dict[str, str]:
    return {f"{module}.x_f__mutmut_{n}": fate for n, fate in enumerate(fates, 1)}


def test_a_mutant_name_says_its_module_for_functions_and_methods() -> None:
    assert module_of("workflows.pure.decide.x_decide__mutmut_3") == "workflows.pure.decide"
    assert (
        module_of("overnight.core.output_tail.x__cut_prefix__mutmut_2")
        == "overnight.core.output_tail"
    )
    assert module_of("workflows.pure.card.xǁCardǁline__mutmut_1") == "workflows.pure.card"
    with pytest.raises(ValueError):
        module_of("not a mutant")


def test_mutmut_results_lines_become_fates() -> None:
    said = "    a.x_f__mutmut_1: killed\n    a.x_f__mutmut_2: no tests\nnoise\n"
    assert read_fates(said.splitlines()) == {
        "a.x_f__mutmut_1": "killed",
        "a.x_f__mutmut_2": "no tests",
    }


def test_equivalent_survivors_leave_the_score_and_timeouts_count_as_caught() -> None:
    fates = fates_of("m", "killed", "timeout", "survived", "survived")
    listed = {
        "m.x_f__mutmut_3": Listed("equivalent", "the same codec"),
        "m.x_f__mutmut_4": Listed("left", "nothing relies on the order"),
    }
    verdict = judge(fates, listed)
    tally = verdict.modules["m"]
    assert (tally.planted, tally.caught, tally.equivalent, tally.left) == (4, 2, 1, 1)
    assert (tally.counted, round(tally.score, 1)) == (3, 66.7)
    assert verdict.unlisted == [] and verdict.stale == []
    assert verdict.below_bar == ["m: 66.7% < 90%", "the whole: 66.7% < 95%"]
    assert not verdict.passed


def test_a_survivor_or_an_unreached_mutant_not_listed_fails_the_run() -> None:
    verdict = judge(fates_of("m", *["killed"] * 98, "survived", "no tests"), {})
    assert set(verdict.unlisted) == {"m.x_f__mutmut_99 (survived)", "m.x_f__mutmut_100 (no tests)"}
    assert verdict.below_bar == []  # 98 of 100 is above both bars ...
    assert not verdict.passed  # ... and still each one is a missing test or a line to write


def test_a_listed_mutant_that_is_caught_or_gone_makes_the_list_stale() -> None:
    fates = fates_of("m", "killed", "killed")
    listed = {
        "m.x_f__mutmut_1": Listed("equivalent", "was"),
        "m.x_f__mutmut_9": Listed("equivalent", "its function changed"),
        "other.x_f__mutmut_1": Listed("equivalent", "its module was not run"),
    }
    assert judge(fates, listed).stale == ["m.x_f__mutmut_1", "m.x_f__mutmut_9"]


def test_every_module_must_reach_its_bar_not_only_the_whole() -> None:
    fates = fates_of("good", *["killed"] * 100) | fates_of("weak", *["killed"] * 8, "survived")
    listed = {"weak.x_f__mutmut_9": Listed("left", "on purpose")}
    verdict = judge(fates, listed)
    assert round(verdict.whole.score, 1) == 99.1
    assert verdict.below_bar == ["weak: 88.9% < 90%"]


def test_the_survivors_file_is_well_formed_and_a_bad_line_is_refused() -> None:
    listed = read_listed(SURVIVORS_FILE.read_text())
    assert all(entry.why for entry in listed.values())
    with pytest.raises(ValueError, match="line 2"):
        read_listed("# comment\nm.x_f__mutmut_1 equivalnt typo\n")


RUN = {"finished_at": "t1", "commit": "abc1234", "machine": "2 cores", "seconds": 321}


def test_the_score_is_recorded_as_rows_of_its_own_group(tmp_path: Path) -> None:
    verdict = judge(fates_of("m", "killed", "killed", "survived"), {})
    rows = result_rows(verdict, seconds=321.4)
    assert [row.metric for row in rows] == [
        "mutation score, m",
        "mutation score, the whole pure core",
        "mutation testing: one run of every mutant",
    ]
    assert rows[0].overnight == 66.7 and rows[0].passed is False and rows[2].overnight == 321
    meta = {"finished_at": "t1", "metrics": [GROUP]}
    save_results(tmp_path, rows, details_of(verdict, RUN), meta, out=lambda _: None)
    written = json.loads((tmp_path / "latest.json").read_text())
    assert {row["group"] for row in written["rows"]} == {GROUP}
    recorded = written["details"][GROUP]
    assert recorded["modules"]["m"] == {"mutants": 3, "caught": 2, "equivalent": 0, "left": 0}
    assert recorded["run"] == RUN


def test_the_pages_table_is_each_modules_counts_and_the_whole() -> None:
    fates = fates_of("workflows.pure.decide", "killed", "survived", "killed")
    fates |= fates_of("workflows.pure", "killed")
    listed = {"workflows.pure.decide.x_f__mutmut_2": Listed("equivalent", "the same")}
    table = page_table(details_of(judge(fates, listed), RUN))
    assert table.splitlines() == [
        "| module | mutants | killed | equivalent | left | score |",
        "|---|---:|---:|---:|---:|---:|",
        "| `workflows/pure/__init__.py` | 1 | 1 | 0 | 0 | 100.0% |",
        "| `workflows/pure/decide.py` | 3 | 2 | 1 | 0 | 100.0% |",
        "| **the whole** | 4 | 3 | 1 | 0 | 100.0% |",
        "",
        "Generated from `bench/results/latest.json` by `bash scripts/mutation --record`; do not "
        "edit. The run finished t1 at abc1234 on 2 cores: 321 s of mutmut for 4 mutants.",
    ]


def test_the_reliability_page_shows_the_recorded_score() -> None:
    """docs/reliability.md's table is bench/results/latest.json's record of the last
    `bash scripts/mutation --record`, not edited by hand."""
    document = json.loads((RESULTS_DIR / "latest.json").read_text())
    rows, _ = read_results(RESULTS_DIR)
    assert any(row.group == GROUP for row in rows)
    table = page_table(document["details"])
    assert f"<!-- generated: {GROUP} -->\n\n{table}\n\n<!-- end generated: {GROUP} -->" in (
        SCORE_PAGE.read_text()
    )


def test_every_module_the_settings_name_is_covered_even_with_nothing_to_mutate() -> None:
    modules = mutated_modules()
    assert "workflows.pure.state" in modules and "workflows.pure.decide" in modules
    assert "overnight.core.output_tail" in modules and "workflows.pure" in modules  # its __init__
    verdict = judge(fates_of("workflows.pure.decide", "killed"), {}, modules)
    data_only = verdict.modules["workflows.pure.state"]
    assert (data_only.planted, data_only.score) == (0, 100.0) and verdict.passed
