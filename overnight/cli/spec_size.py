"""The largest spec a client sends, checked before anything is sent. Pure.

A spec is the run's workflow input, and Temporal holds every payload to a size: it warns from
512 KiB (the SDK prints a Rust `WARN … [TMPRL1103]` line on the user's terminal) and refuses
from 2 MB (`RPCError: Blob data size exceeds limit.`, naming no field). The spec travels on in
the run's own events too: a continue-as-new carries it twice (the input, and the state holding
it) beside a checkpoint of up to 1 MiB. At most 256 KiB keeps every one of those under both
limits. A spec that needs more (a long prompt, a big `env` value) puts it in a file: in the
`agent_dir`, the repo, or behind `secret_env`.
"""

from __future__ import annotations

import json
from typing import Any

from overnight.core.models import RunSpec

MAX_SPEC_BYTES = 256 * 1024


def size_text(n: int) -> str:
    if n < 1024 * 1024:
        return f"{n / 1024:.0f} KiB"
    return f"{n / 1024 / 1024:.1f} MiB"


def too_large(spec: RunSpec) -> str | None:
    """Why `spec` is too large to send, naming the field that makes it so and the fix; None
    when it fits."""
    if len(spec.model_dump_json().encode()) <= MAX_SPEC_BYTES:  # as the client sends it
        return None
    field, field_size = _largest(spec.model_dump(mode="json"))
    return (
        f"spec too large: {field} is {size_text(field_size)}; a spec may be at most "
        f"{size_text(MAX_SPEC_BYTES)} (Temporal's payload limits): put large data in a file "
        "in agent_dir or the repo, and name it in the spec"
    )


def _largest(value: Any, path: str = "") -> tuple[str, int]:
    """The path of the part of `value` that holds most of it (`env.BIG`, `agent.prompt`,
    `done_when[0]`), and its size: down through objects and lists while one part holds most."""
    parts: list[tuple[str, Any]] = []
    if isinstance(value, dict):
        parts = [(f"{path}.{key}" if path else str(key), item) for key, item in value.items()]
    elif isinstance(value, list):
        parts = [(f"{path}[{n}]", item) for n, item in enumerate(value)]
    size = _bytes(value)
    if parts:
        name, part = max(parts, key=lambda named: _bytes(named[1]))
        if _bytes(part) * 2 > size:
            return _largest(part, name)
    return path or "the spec", size


def _bytes(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False).encode())
