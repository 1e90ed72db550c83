"""A spec's validation errors in a person's words: every one at once, on one line.

An unknown key is named with the field it probably is (`comand`: did you mean `command`?; a
top-level `max_restarts`: it belongs in `budget.max_restarts`), and a pattern is said in words
instead of as its regex.
"""

from __future__ import annotations

import difflib
import re
import types
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from overnight.core.model_base import RUN_ID_PATTERN, RUN_ID_PATTERN_OR_EMPTY

_RUN_ID_WORDS = (
    "must be 1 to 63 characters of a-z, 0-9 and '-', the first a letter or digit "
    "(e.g. 'fix-issue-42')"
)
# Each pattern a spec holds, said in words.
PATTERN_WORDS = {
    RUN_ID_PATTERN: _RUN_ID_WORDS,
    RUN_ID_PATTERN_OR_EMPTY: _RUN_ID_WORDS + ", or left out",
    r"^[ -~]{0,64}$": "must be at most 64 printable ASCII characters",
}
_NAMED_FIELD = re.compile(r"^Value error, ([a-z_]+): (.*)$", re.DOTALL)
_CLOSE_ENOUGH = 0.6


def describe_errors(err: ValidationError, source: str, model: type[BaseModel]) -> str:
    """Every wrong field on one line: `spec: 2 problems: field a: why; field b: why`."""
    parts = list(
        dict.fromkeys(
            f"field {printable(where)}: {printable(message)}"
            for where, message in (field_and_message(e, model) for e in err.errors())
        )
    )
    count = f"{len(parts)} problems: " if len(parts) > 1 else ""
    return f"{source}: {count}" + "; ".join(parts)


def field_and_message(error: ErrorDetails, model: type[BaseModel]) -> tuple[str, str]:
    """The error's field (dotted) and what is wrong with it, in words."""
    loc = tuple(error["loc"])
    where = ".".join(str(part) for part in loc)
    kind = error["type"]
    message = str(error["msg"])
    if kind == "extra_forbidden":
        return where, unknown_field(model, loc)
    if kind == "missing":
        return where, "required, and missing"
    if kind == "string_pattern_mismatch":
        pattern = str((error.get("ctx") or {}).get("pattern", ""))
        words = PATTERN_WORDS.get(pattern)
        if words is not None:
            return where, f"{words}, got {error['input']!r}"
    if not where:
        named = _NAMED_FIELD.match(message)
        if named is None:
            return "(spec)", message.removeprefix("Value error, ")
        return named.group(1), named.group(2)
    return where, message.removeprefix("Value error, ")


def unknown_field(model: type[BaseModel], loc: tuple[int | str, ...]) -> str:
    """`unknown field`, and the field it was probably meant to be."""
    name = str(loc[-1])
    here = _path(loc[:-1])
    known = field_paths(model)
    siblings = [path for path in known if _parent(path) == here]
    elsewhere = [p for p in known if p.rsplit(".", 1)[-1] == name and _parent(p) != here]
    if elsewhere:
        target = elsewhere[0]
        if not _parent(target):
            return f"unknown field: it belongs at the top level (`{target}`)"
        return f"unknown field: it belongs in `{target}`"
    scored = [(_likeness(name, path.rsplit(".", 1)[-1]), path in siblings, path) for path in known]
    ratio, sibling, best = max(scored, default=(0.0, False, ""))
    if ratio >= _CLOSE_ENOUGH:
        return f"unknown field: did you mean `{best.rsplit('.', 1)[-1] if sibling else best}`?"
    return "unknown field"


def field_paths(model: type[BaseModel], prefix: str = "", depth: int = 2) -> list[str]:
    """Every field of `model` and of the models in it (`budget.max_restarts`), dotted."""
    paths: list[str] = []
    for name, field in model.model_fields.items():
        path = _joined(prefix, name)
        paths.append(path)
        inner = _model_in(field.annotation)
        if inner is not None and depth > 1:
            paths += field_paths(inner, path, depth - 1)
    return paths


def _likeness(a: str, b: str) -> float:
    return difflib.SequenceMatcher(None, a, b).ratio()


def printable(text: str) -> str:
    """`text` on one line: a field name from the file may hold a newline or worse."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The model a field holds, through `X | None`, `list[X]` and `dict[str, X]`."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if get_origin(annotation) in (Union, types.UnionType, list, dict):
        for arg in get_args(annotation):
            found = _model_in(arg)
            if found is not None:
                return found
    return None


def _path(loc: tuple[int | str, ...]) -> str:
    # List indexes (`binds.0.path`) are no part of a field's name.
    return ".".join(str(part) for part in loc if isinstance(part, str))


def _parent(path: str) -> str:
    return path.rsplit(".", 1)[0] if "." in path else ""


def _joined(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name
