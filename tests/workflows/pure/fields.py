"""Setting a `SupervisorState`'s fields by their names in the flat state, as the tests'
helpers take them (workflows/pure/state_shape.py says which group holds each)."""

from __future__ import annotations

from typing import Any

from workflows.pure.state import SupervisorState
from workflows.pure.state_shape import GROUP_OF


def put(s: SupervisorState, **fields: Any) -> SupervisorState:
    """`s`, each of `fields` set where it lives (no validation, as a plain assignment)."""
    for name, value in fields.items():
        group = GROUP_OF.get(name)
        setattr(s if group is None else getattr(s, group), name, value)
    return s
