"""Reading a RunSpec from a file, and what of it may be shown (summaries carry no secrets)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit, urlunsplit

from pydantic import ValidationError

from overnight.errors import SpecError
from overnight.models import RunSpec


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
    """A relative local `agent_dir` or `repo` is taken from `base` (the file's folder)."""
    for field in ("agent_dir", "repo"):
        value = raw.get(field)
        if isinstance(value, str) and _is_relative_local_path(value):
            raw[field] = str(base / value)


def parse_spec(raw: Mapping[str, Any], *, source: str = "spec") -> RunSpec:
    try:
        return RunSpec.model_validate(raw)
    except ValidationError as err:
        where, message = first_error(err)
        raise SpecError(f"{source}: field {_printable(where)}: {_printable(message)}") from None


def describe_errors(err: ValidationError, source: str) -> str:
    """Every wrong field on one line: `spec: field a: why; field b: why`."""
    parts = [
        f"field {_printable(where)}: {_printable(message)}"
        for where, message in (_field_and_message(e) for e in err.errors())
    ]
    return f"{source}: " + "; ".join(dict.fromkeys(parts))


def first_error(err: ValidationError) -> tuple[str, str]:
    """The first error's field and message; a check across fields names its field first."""
    return _field_and_message(err.errors()[0])


def _field_and_message(first: Any) -> tuple[str, str]:
    where = ".".join(str(part) for part in first["loc"])
    message = str(first["msg"])
    if not where:
        named = _NAMED_FIELD.match(message)
        if named is None:
            return "(spec)", message
        where, message = named.group(1), named.group(2)
    return where, message


_NAMED_FIELD = re.compile(r"^Value error, ([a-z_]+): (.*)$", re.DOTALL)


def _printable(text: str) -> str:
    """`text` on one line: a field name from the file may hold a newline or worse."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)


def _is_relative_local_path(value: str) -> bool:
    if "://" in value or (":" in value.split("/")[0]):  # URL or scp-like user@host:path
        return False
    return bool(value) and not Path(value).is_absolute()


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
