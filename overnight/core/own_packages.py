"""overnight ships two packages under generic names, `workflows` and `activities` (the layout
Temporal's samples teach, so a user's own Temporal project often has folders of the same
names). One of those earlier on `sys.path` (the current folder, a project on PYTHONPATH) hides
overnight's, and the worker would fail on an import error that names neither. This finds it
first, without importing either package, so the worker and the CLI can say what is wrong."""

from __future__ import annotations

import importlib.util
from pathlib import Path

OWN_PACKAGES = ("workflows", "activities")
# overnight's own packages sit beside `overnight/` (in site-packages, or in the checkout);
# this module is in overnight/core/.
HOME = Path(__file__).resolve().parents[2]


def shadowed_packages(home: Path = HOME) -> list[str]:
    """One line for each of overnight's generic packages that does not resolve to its own
    (under `home`); empty when both do."""
    problems = []
    for name in OWN_PACKAGES:
        own = home / name
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError) as err:
            problems.append(f"`import {name}` fails ({err}); overnight's own is {own}")
            continue
        found = None if spec is None else _location(spec)
        if found is None:
            problems.append(f"`import {name}` finds nothing; overnight's own should be {own}")
        elif found != own.resolve():
            problems.append(
                f"`import {name}` finds {found}, not overnight's own {own}: a package of that "
                "name earlier on sys.path (the current folder, PYTHONPATH) hides it; run from "
                "another folder or rename that package"
            )
    return problems


def _location(spec: importlib.machinery.ModuleSpec) -> Path | None:
    """The folder a package spec stands for (a module file: its path)."""
    locations = list(spec.submodule_search_locations or [])
    if locations:
        return Path(locations[0]).resolve()
    return Path(spec.origin).resolve() if spec.origin else None
