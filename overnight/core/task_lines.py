"""The tasks file of `overnight start --many`: JSON Lines, one run per line (docs/many-runs.md).

Two forms:

- every line a whole `RunSpec`;
- a first line `{"base": {...}}`, a spec in which strings may hold `{{name}}`, then one line
  per run: `{"vars": {"name": "value", ...}}`, and any spec field to set for that run alone
  (`priority`, `owner`, `env`, ...: it replaces the base's).

Blank lines and lines starting with `#` are skipped. Every line is checked before any run
starts: a bad one is refused (`SpecError` naming the file and line). A line without a `run_id`
gets one from its content (`task-` and 12 hex of the spec's hash), so the same line names the
same run on every re-run and never starts twice.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from overnight.core.errors import SpecError
from overnight.core.models import RunSpec
from overnight.core.specs import parse_spec, resolve_relative_paths

MAX_TASKS_BYTES = 16 * 1024 * 1024
MAX_TASKS = 10_000
RUN_ID_PREFIX = "task-"
_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


@dataclass(frozen=True)
class Task:
    line: int
    spec: RunSpec
    # The line names the same run as an earlier line (its number): it is not started twice.
    same_as: int | None = None


def load_tasks(path: str | Path) -> list[Task]:
    """Every run of the tasks file at `path`, checked; `SpecError` for the first bad line."""
    tasks_path = Path(path)
    try:
        with tasks_path.open("rb") as stream:
            data = stream.read(MAX_TASKS_BYTES + 1)
    except OSError as err:
        raise SpecError(f"{tasks_path}: {err.strerror or err}") from None
    if len(data) > MAX_TASKS_BYTES:
        raise SpecError(f"{tasks_path}: larger than {MAX_TASKS_BYTES // 2**20} MiB")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise SpecError(f"{tasks_path}: not UTF-8 text") from None
    return parse_tasks(text, source=str(tasks_path), base_dir=tasks_path.resolve().parent)


def parse_tasks(text: str, *, source: str, base_dir: Path) -> list[Task]:
    base: dict[str, Any] | None = None
    tasks: list[Task] = []
    first_line_of: dict[str, int] = {}
    for number, raw_line in enumerate(text.splitlines(), start=1):
        line = raw_line.strip()
        if not line or line.startswith("#"):
            continue
        where = f"{source} line {number}"
        fields = _json_object(line, where)
        if "base" in fields:
            if base is not None or tasks:
                raise SpecError(f"{where}: `base` may only be the first line")
            if set(fields) != {"base"} or not isinstance(fields["base"], dict):
                raise SpecError(f'{where}: a base line is {{"base": {{...spec...}}}} alone')
            base = fields["base"]
            continue
        spec_fields = _line_spec(fields, base, where)
        resolve_relative_paths(spec_fields, base_dir)
        if not spec_fields.get("run_id"):
            spec_fields["run_id"] = content_run_id(spec_fields)
        spec = parse_spec(spec_fields, source=where)
        same_as = first_line_of.setdefault(spec.run_id, number)
        tasks.append(Task(number, spec, None if same_as == number else same_as))
        if len(tasks) > MAX_TASKS:
            raise SpecError(f"{source}: more than {MAX_TASKS} runs in one file")
    if not tasks:
        raise SpecError(f"{source}: no runs in it (one JSON object a line)")
    return tasks


def content_run_id(spec_fields: dict[str, Any]) -> str:
    """A run id that only this content gives: the same line is the same run on a re-run."""
    canonical = json.dumps(spec_fields, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return RUN_ID_PREFIX + hashlib.sha256(canonical.encode()).hexdigest()[:12]


def _json_object(line: str, where: str) -> dict[str, Any]:
    try:
        value = json.loads(line)
    except (ValueError, RecursionError) as err:
        raise SpecError(f"{where}: not valid JSON ({err})") from None
    if not isinstance(value, dict):
        raise SpecError(f"{where}: a line is one JSON object")
    return value


def _line_spec(fields: dict[str, Any], base: dict[str, Any] | None, where: str) -> dict[str, Any]:
    if base is None:
        if "vars" in fields:
            raise SpecError(f'{where}: `vars` needs a first line {{"base": {{...}}}}')
        return dict(fields)
    values = fields.get("vars", {})
    if not isinstance(values, dict) or not all(
        isinstance(k, str) and isinstance(v, str | int | float) for k, v in values.items()
    ):
        raise SpecError(f"{where}: `vars` is an object of names to strings or numbers")
    filled = _fill(base, {k: str(v) for k, v in values.items()}, where)
    assert isinstance(filled, dict)
    return {**filled, **{k: v for k, v in fields.items() if k != "vars"}}


def _fill(value: Any, values: dict[str, str], where: str) -> Any:
    if isinstance(value, str):

        def one(match: re.Match[str]) -> str:
            name = match.group(1)
            if name not in values:
                raise SpecError(f"{where}: the base uses {{{{{name}}}}} but `vars` has no {name}")
            return values[name]

        return _PLACEHOLDER.sub(one, value)
    if isinstance(value, dict):
        return {key: _fill(item, values, where) for key, item in value.items()}
    if isinstance(value, list):
        return [_fill(item, values, where) for item in value]
    return value
