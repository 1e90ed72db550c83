"""The mutation score of the pure core, from mutmut's results: what became of each mutant,
set against the survivors scripts/mutation-survivors.txt lists, per module and for the whole,
and held to the bars. Pure: text in, a `Verdict` out (bench/mutation.py runs it)."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
SURVIVORS_FILE = REPO_ROOT / "scripts" / "mutation-survivors.txt"
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


def mutated_modules(root: Path = REPO_ROOT) -> list[str]:
    """The modules [tool.mutmut]'s `only_mutate` names (a module with nothing to mutate, such
    as one of pure data, is still one the run covered)."""
    settings = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["mutmut"]
    found = {
        path.relative_to(root).with_suffix("").as_posix().replace("/", ".")
        for pattern in settings["only_mutate"]
        for path in root.glob(pattern)
    }
    return sorted(name.removesuffix(".__init__") for name in found)


def judge(
    fates: Mapping[str, str], listed: Mapping[str, Listed], covered: Iterable[str] = ()
) -> Verdict:
    """Tally the fates by module against the survivors list and the bars; `covered`: modules
    mutated, shown even when they hold no mutant."""
    modules: dict[str, Tally] = {module: Tally() for module in covered}
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
