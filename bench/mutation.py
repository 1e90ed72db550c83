"""Mutation testing's score, printed and recorded: `python -m bench.mutation [--seconds S]
[--record]`.

`bash scripts/mutation` runs mutmut, then pipes `mutmut results --all true` (one line per
mutant: `name: fate`) into this module, which prints for every mutated module and for the whole
how many mutants were planted, caught (a test failed, or the mutant never ended: a timeout) and
listed in scripts/mutation-survivors.txt, and the score: caught of the non-equivalent ones
(bench/mutation_score.py). It exits 1 when a mutant is neither caught nor listed (a missing test,
or a new equivalent mutant to list with why), when a listed one is no longer a survivor (the
list is stale), or when a module's score is below 90% or the whole's below 95%.

With `--record` the figures go into bench/results/latest.json as the rows of group `mutation`
(beside the benchmarks', with the run's time, `--seconds`, measured by the script), and the
table of docs/reliability.md's "Mutation testing" is written again from them.
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.mutation_score import (
    MODULE_BAR,
    REPO_ROOT,
    SURVIVORS_FILE,
    WHOLE_BAR,
    Tally,
    Verdict,
    judge,
    mutated_modules,
    read_fates,
    read_listed,
    render,
)
from bench.report import RESULTS_DIR, Row, fill_page, machine, save_results

GROUP = "mutation"
# The page whose table shows the recorded score, between `<!-- generated: mutation -->` markers.
SCORE_PAGE = REPO_ROOT / "docs" / "reliability.md"


def result_rows(verdict: Verdict, seconds: float | None) -> list[Row]:
    """The rows bench/results keeps: each module's score, the whole's, and the run's time."""
    rows = [
        Row(
            f"mutation score, {module}",
            "%",
            None,
            round(tally.score, 1),
            target=f">= {MODULE_BAR:g}%",
            at_least=MODULE_BAR,
            note=_note(tally),
            group=GROUP,
        )
        for module, tally in sorted(verdict.modules.items())
    ]
    rows.append(
        Row(
            "mutation score, the whole pure core",
            "%",
            None,
            round(verdict.whole.score, 1),
            target=f">= {WHOLE_BAR:g}%",
            at_least=WHOLE_BAR,
            note=_note(verdict.whole),
            group=GROUP,
        )
    )
    if seconds is not None:
        rows.append(
            Row(
                "mutation testing: one run of every mutant",
                "s",
                None,
                round(seconds),
                note=f"{verdict.whole.planted} mutants (bash scripts/mutation)",
                group=GROUP,
            )
        )
    return rows


def _note(tally: Tally) -> str:
    return (
        f"{tally.planted} mutants: {tally.caught} caught, {tally.equivalent} equivalent, "
        f"{tally.left} left on purpose (scripts/mutation-survivors.txt)"
    )


def details_of(verdict: Verdict, run: dict[str, Any]) -> dict[str, Any]:
    """What bench/results keeps of the run beside the rows: each module's counts, and the run
    (when it finished, at which commit, on what, how long mutmut took)."""
    return {
        GROUP: {
            "run": run,
            "modules": {
                module: {
                    "mutants": tally.planted,
                    "caught": tally.caught,
                    "equivalent": tally.equivalent,
                    "left": tally.left,
                }
                for module, tally in sorted(verdict.modules.items())
            },
        }
    }


def page_table(details: dict[str, Any]) -> str:
    """docs/reliability.md's table of the recorded run, from its details in latest.json."""
    recorded = details[GROUP]
    lines = [
        "| module | mutants | killed | equivalent | left | score |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    whole = Tally()
    for module, counts in recorded["modules"].items():
        tally = Tally(counts["mutants"], counts["caught"], counts["equivalent"], counts["left"])
        for field in ("planted", "caught", "equivalent", "left"):
            setattr(whole, field, getattr(whole, field) + getattr(tally, field))
        lines.append(_table_line(f"`{_path_of(module)}`", tally))
    lines.append(_table_line("**the whole**", whole))
    run = recorded["run"]
    said = (
        f"Generated from `bench/results/latest.json` by `bash scripts/mutation --record`; do not "
        f"edit. The run finished {run['finished_at']} at {run['commit'] or 'an unknown commit'} "
        f"on {run['machine']}: {run['seconds']} s of mutmut for {whole.planted} mutants."
    )
    return "\n".join(lines) + "\n\n" + said


def _table_line(name: str, tally: Tally) -> str:
    return (
        f"| {name} | {tally.planted} | {tally.caught} | {tally.equivalent} | {tally.left} | "
        f"{tally.score:.1f}% |"
    )


def _path_of(module: str) -> str:
    path = module.replace(".", "/")
    return f"{path}/__init__.py" if path == "workflows/pure" else f"{path}.py"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.mutation")
    parser.add_argument("--seconds", type=float, help="how long mutmut ran (for the record)")
    parser.add_argument("--commit", default="", help="the commit the run tested (for the record)")
    parser.add_argument(
        "--record", action="store_true", help="write the figures into bench/results"
    )
    parser.add_argument("--results", type=Path, default=RESULTS_DIR, help="folder for latest.json")
    args = parser.parse_args(argv)
    fates = read_fates(sys.stdin)
    verdict = judge(
        fates, read_listed(SURVIVORS_FILE.read_text()), mutated_modules() if fates else ()
    )
    print(render(verdict))
    if args.record and verdict.modules:
        finished = datetime.now(UTC)
        started = finished - timedelta(seconds=args.seconds or 0)
        meta = {
            "command": "bash scripts/mutation --record",
            "machine": machine(),
            "started_at": started.isoformat(timespec="seconds"),
            "finished_at": finished.isoformat(timespec="seconds"),
            "wall_seconds": None if args.seconds is None else round(args.seconds),
            "metrics": [GROUP],
        }
        run = {
            "finished_at": meta["finished_at"],
            "commit": args.commit,
            "machine": meta["machine"],
            "seconds": meta["wall_seconds"],
        }
        details = details_of(verdict, run)
        rows = result_rows(verdict, args.seconds)
        _, json_path, _ = save_results(args.results, rows, details, meta)
        print(f"wrote {json_path}")
        if args.results.resolve() == RESULTS_DIR:
            if fill_page(SCORE_PAGE, {GROUP: page_table(details)}):
                print(f"warning: {SCORE_PAGE} has no markers for its table: not written")
            else:
                print(f"rewrote the table in {SCORE_PAGE}")
    return 0 if verdict.passed else 1


if __name__ == "__main__":
    raise SystemExit(main())
