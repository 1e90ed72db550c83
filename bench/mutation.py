"""The mutation score of the pure core: `python -m bench.mutation [--seconds S] [--record]`.

`bash scripts/mutation` runs mutmut, then pipes `mutmut results --all true` (one line per
mutant: `name: fate`) into this module. It sets aside the survivors that
scripts/mutation-survivors.txt lists as equivalent (no test can tell them from the code) and
prints, for every mutated module and for the whole, how many mutants were planted, caught (a
test failed, or the mutant never ended: a timeout), listed, and the score: caught of the
non-equivalent ones.

It exits 1 when a mutant is neither caught nor listed (a missing test, or a new equivalent
mutant to list with why), when a listed one is no longer a survivor (the list is stale), when a
module's score is below `MODULE_BAR` or the whole's below `WHOLE_BAR`. With `--record` the
figures go into bench/results/latest.json as the rows of group `mutation`, beside the
benchmarks', with the run's time (`--seconds`, measured by the script).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.report import RESULTS_DIR, Row, machine, save_results

GROUP = "mutation"
SURVIVORS_FILE = Path(__file__).resolve().parent.parent / "scripts" / "mutation-survivors.txt"
# The least share of a module's non-equivalent mutants the tests must catch, and of the whole's.
MODULE_BAR = 90.0
WHOLE_BAR = 95.0
# Fates that mean a test noticed the mutant: a test failed, or the mutant made it run forever.
CAUGHT = frozenset({"killed", "timeout"})
# The kinds a listed survivor may have (see scripts/mutation-survivors.txt's header).
KINDS = ("equivalent", "left")
# A mutant's name is its module, then `x_function` or `xǁClassǁmethod`, then its number.
_MODULE = re.compile(r"^(?P<module>.+?)\.xǁ|^(?P<plain>.+?)\.x_")


@dataclass(frozen=True)
class Listed:
    """A survivor scripts/mutation-survivors.txt names, and why."""

    kind: str
    why: str


@dataclass
class Tally:
    """One module's mutants (or the whole's), by what became of them."""

    planted: int = 0
    caught: int = 0
    equivalent: int = 0
    left: int = 0

    @property
    def counted(self) -> int:
        """The mutants that count: all but the equivalent ones."""
        return self.planted - self.equivalent

    @property
    def score(self) -> float:
        """Caught, in percent of the mutants that count (100 when none count)."""
        return 100.0 * self.caught / self.counted if self.counted else 100.0


@dataclass
class Verdict:
    """What a run's results say: the tallies, and everything that fails the run."""

    modules: dict[str, Tally]
    whole: Tally
    unlisted: list[str]  # neither caught nor listed: `name (fate)`
    stale: list[str]  # listed, but not a survivor now
    below_bar: list[str]  # a module, or the whole, under its bar

    @property
    def passed(self) -> bool:
        return bool(self.modules) and not (self.unlisted or self.stale or self.below_bar)


def module_of(mutant: str) -> str:
    """`workflows.pure.decide.x_decide__mutmut_3` -> `workflows.pure.decide`."""
    found = _MODULE.match(mutant)
    if not found:
        raise ValueError(f"not a mutmut mutant name: {mutant!r}")
    return found["module"] or found["plain"]


def read_fates(lines: Iterable[str]) -> dict[str, str]:
    """Each mutant's fate, from `mutmut results --all true`."""
    fates = {}
    for line in lines:
        name, sep, fate = line.strip().partition(": ")
        if sep:
            fates[name] = fate
    return fates


def read_listed(text: str) -> dict[str, Listed]:
    """The survivors file: `NAME KIND WHY` a line; `#` lines and blank lines are comments."""
    listed = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = line.split(None, 2)
        if len(parts) < 3 or parts[1] not in KINDS:
            raise ValueError(f"survivors file line {number}: want NAME KIND WHY, got {line!r}")
        listed[parts[0]] = Listed(parts[1], parts[2].strip())
    return listed


def judge(fates: Mapping[str, str], listed: Mapping[str, Listed]) -> Verdict:
    """Tally the fates by module against the survivors list and the bars."""
    modules: dict[str, Tally] = {}
    whole = Tally()
    unlisted, stale = [], []
    for name, fate in sorted(fates.items()):
        tally = modules.setdefault(module_of(name), Tally())
        said = listed.get(name)
        for each in (tally, whole):
            each.planted += 1
            if fate in CAUGHT:
                each.caught += 1
            elif said and said.kind == "equivalent":
                each.equivalent += 1
            elif said:
                each.left += 1
        if fate not in CAUGHT and not said:
            unlisted.append(f"{name} ({fate})")
        if fate in CAUGHT and said:
            stale.append(name)
    # A listed name mutmut no longer plants (its function changed) is stale too, but only
    # when its module was run: a run of some mutants says nothing of the others.
    stale += sorted(name for name in listed if name not in fates and _module_ran(name, modules))
    below = [
        f"{module}: {tally.score:.1f}% < {MODULE_BAR:g}%"
        for module, tally in sorted(modules.items())
        if tally.score < MODULE_BAR
    ]
    if whole.score < WHOLE_BAR:
        below.append(f"the whole: {whole.score:.1f}% < {WHOLE_BAR:g}%")
    return Verdict(modules, whole, unlisted, stale, below)


def _module_ran(name: str, modules: Mapping[str, Tally]) -> bool:
    try:
        return module_of(name) in modules
    except ValueError:
        return True  # not even a mutant's name: certainly stale


def render(verdict: Verdict) -> str:
    """The score table, then every reason the run fails."""
    width = max([len(m) for m in verdict.modules] + [len("the whole")])
    lines = [
        f"{'module':<{width}}  {'mutants':>7}  {'caught':>6}  {'equiv':>5}  {'left':>4}  score"
    ]
    rows = [*sorted(verdict.modules.items()), ("the whole", verdict.whole)]
    for module, tally in rows:
        lines.append(
            f"{module:<{width}}  {tally.planted:>7}  {tally.caught:>6}  {tally.equivalent:>5}  "
            f"{tally.left:>4}  {tally.caught} of {tally.counted} ({tally.score:.1f}%)"
        )
    lines += [f"NOT CAUGHT: {name}  (.venv/bin/mutmut show NAME)" for name in verdict.unlisted]
    lines += [f"listed in the survivors file but no survivor now: {n}" for n in verdict.stale]
    lines += [f"BELOW THE BAR: {said}" for said in verdict.below_bar]
    if not verdict.modules:
        lines.append("no mutant results: did mutmut run?")
    return "\n".join(lines)


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


def details_of(verdict: Verdict) -> dict[str, Any]:
    return {
        GROUP: {
            module: {
                "mutants": tally.planted,
                "caught": tally.caught,
                "equivalent": tally.equivalent,
                "left": tally.left,
            }
            for module, tally in sorted(verdict.modules.items())
        }
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.mutation")
    parser.add_argument("--seconds", type=float, help="how long mutmut ran (for the record)")
    parser.add_argument(
        "--record", action="store_true", help="write the figures into bench/results"
    )
    parser.add_argument("--results", type=Path, default=RESULTS_DIR, help="folder for latest.json")
    args = parser.parse_args(argv)
    verdict = judge(read_fates(sys.stdin), read_listed(SURVIVORS_FILE.read_text()))
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
        rows = result_rows(verdict, args.seconds)
        _, json_path, _ = save_results(args.results, rows, details_of(verdict), meta)
        print(f"wrote {json_path}")
    return 0 if verdict.passed else 1


if __name__ == "__main__":
    raise SystemExit(main())
