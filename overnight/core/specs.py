"""Reading a RunSpec from a file, and what of it may be shown (summaries carry no secrets)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit, urlunsplit

from pydantic import BaseModel, ValidationError

from overnight.core import spec_messages
from overnight.core.errors import SpecError
from overnight.core.models import RunSpec
from overnight.core.spec_paths import HOST_PATH_FIELDS, is_relative_local_path


def load_spec(path: str | Path) -> RunSpec:
    """Read and validate a spec file; relative local paths are taken from the file's folder."""
    spec_path = Path(path)
    try:
        raw = json.loads(spec_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SpecError(f"{spec_path}: no such file") from None
    except OSError as err:
        raise SpecError(f"{spec_path}: {err.strerror or err}") from None
    except ValueError as err:
        raise SpecError(f"{spec_path}: not valid JSON ({err})") from None
    except RecursionError:
        raise SpecError(f"{spec_path}: not valid JSON (nested too deeply)") from None
    if not isinstance(raw, dict):
        raise SpecError(f"{spec_path}: a spec is a JSON object")
    resolve_relative_paths(raw, spec_path.resolve().parent)
    return parse_spec(raw, source=str(spec_path))


def resolve_relative_paths(raw: dict[str, Any], base: Path) -> None:
    """Every relative host path in `raw` (a spec as read from a file) taken from `base`, the
    file's folder, and normalised (`../agent` is the folder beside it)."""
    for field in HOST_PATH_FIELDS:
        value = raw.get(field)
        if isinstance(value, str) and is_relative_local_path(value):
            raw[field] = _from(base, value)
    binds = raw.get("binds")
    if isinstance(binds, list):
        for bind in binds:
            path = bind.get("path") if isinstance(bind, dict) else None
            if isinstance(path, str) and path and not path.startswith("/"):
                bind["path"] = _from(base, path)


def _from(base: Path, relative: str) -> str:
    return os.path.normpath(base / os.path.expanduser(relative))


def parse_spec(raw: Mapping[str, Any], *, source: str = "spec") -> RunSpec:
    """`raw` as a RunSpec, or a SpecError naming every wrong field at once."""
    try:
        return RunSpec.model_validate(raw)
    except ValidationError as err:
        raise SpecError(describe_errors(err, source)) from None


def describe_errors(err: ValidationError, source: str, model: type[BaseModel] = RunSpec) -> str:
    """Every wrong field on one line, in words (overnight/core/spec_messages.py)."""
    return spec_messages.describe_errors(err, source, model)


def first_error(err: ValidationError) -> tuple[str, str]:
    """The first error's field and message; a check across fields names its field first."""
    return spec_messages.field_and_message(err.errors()[0], RunSpec)


def redact_url(url: str) -> str:
    """`https://user:token@host/x?key=v` -> `https://host/x?key=***`: credentials never go
    into summaries or errors."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "(a repository URL that does not parse)"
    if not parts.scheme:
        return url
    query = "&".join(f"{key}=***" for key, _ in parse_qsl(parts.query, keep_blank_values=True))
    return urlunsplit(
        parts._replace(netloc=parts.netloc.rsplit("@", 1)[-1], query=query, fragment="")
    )


def url_secrets(url: str) -> list[str]:
    """What in `url` may be a credential: its user info (the user too: often a token) and
    its query's values, as written and decoded; longest first. (Parts under three characters
    are left out: no credential, and replacing them would garble the text around.)"""
    try:
        parts = urlsplit(url)
    except ValueError:
        return [url]
    found: list[str] = []
    if parts.scheme and "@" in parts.netloc:
        info = parts.netloc.rsplit("@", 1)[0]
        found += [info, *info.split(":", 1)]
    found += [pair.partition("=")[2] for pair in parts.query.split("&")]
    found += [value for _, value in parse_qsl(parts.query)]
    found += [unquote(item) for item in found]
    return sorted({item for item in found if len(item) >= 3}, key=len, reverse=True)


def scrub_url(text: str, url: str) -> str:
    """`text` with `url` redacted wherever it appears, and every credential in it as `***`
    (git may print the URL in its own way)."""
    text = text.replace(url, redact_url(url))
    for secret in url_secrets(url):
        text = text.replace(secret, "***")
    return text


def run_summary(spec: RunSpec) -> str:
    return f"overnight run {spec.run_id}: {redact_url(spec.repo)} @ {spec.branch}"
