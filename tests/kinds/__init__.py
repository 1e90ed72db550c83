"""What the tests know of each coding-agent kind, one module per kind (`claude_code.py`,
`codex.py`: its `FACTS`, a `base.KindFacts`, and its `Driver`), found here with pkgutil: a new
kind's tests are its one new module. `KIND_FACTS` (by kind, sorted) is what the tests that run
every kind are parametrized from; test_kinds.py holds that it names `AGENT_CLIS`'s kinds."""

from __future__ import annotations

import importlib
import pkgutil

from tests.kinds.base import KindFacts

NOT_KINDS = frozenset({"base"})  # this package's modules that are no kind's


def _discover() -> dict[str, KindFacts]:
    found: dict[str, KindFacts] = {}
    for module in pkgutil.iter_modules(__path__):
        if module.name in NOT_KINDS or module.name.startswith(("_", "test_")):
            continue
        facts = importlib.import_module(f"{__name__}.{module.name}").FACTS
        # A kind's module is named after it: claude_code.py, claude-code.
        if not isinstance(facts, KindFacts) or facts.kind.replace("-", "_") != module.name:
            raise TypeError(f"{__name__}.{module.name}.FACTS: not the KindFacts of its kind")
        found[facts.kind] = facts
    return dict(sorted(found.items()))


KIND_FACTS: dict[str, KindFacts] = _discover()


def facts(kind: str) -> KindFacts:
    try:
        return KIND_FACTS[kind]
    except KeyError:
        known = ", ".join(KIND_FACTS)
        raise KeyError(f"no test facts of kind {kind!r} in tests/kinds/ (known: {known})") from None


__all__ = ["KIND_FACTS", "KindFacts", "facts"]
