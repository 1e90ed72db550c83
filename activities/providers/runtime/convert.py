"""Runtime's JSON answers as the provider interface's answers, and the start-key marker."""

from __future__ import annotations

import posixpath
import re
from datetime import UTC, datetime
from hashlib import sha256
from typing import Any

from activities.models import ProcessState, SandboxInfo, SandboxState
from activities.providers.protocol import ProcessInfo

START_KEY_MARKER = "# overnight-start-key="
WORKSPACE = "/workspace"
# Runtime's own states folded into the few the workflow reasons about.
_SANDBOX_STATES: dict[str, SandboxState] = {
    "starting": "starting",
    "resuming": "starting",
    "running": "running",
    "pausing": "paused",
    "paused": "paused",
    "stopping": "stopped",
    "stopped": "stopped",
    "deleted": "missing",
}
_PROCESS_STATES: dict[str, ProcessState] = {
    "running": "running",
    "exited": "exited",
    "killed": "killed",
}
_SAFE_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$")


def start_marker(start_key: str) -> str:
    """The comment line that tags a spawned agent with its start key."""
    key = start_key if _SAFE_KEY.match(start_key) else sha256(start_key.encode()).hexdigest()
    return f"{START_KEY_MARKER}{key}"


def start_key_of(info: dict[str, Any]) -> str | None:
    """The start key a spawned agent's process is tagged with (its command's first line, as
    `start_marker` wrote it), or None for a process overnight did not tag."""
    first = str(info.get("command") or "").split("\n", 1)[0]
    if not first.startswith(START_KEY_MARKER):
        return None
    return first[len(START_KEY_MARKER) :].strip()


def in_workspace(path: str) -> bool:
    normal = posixpath.normpath(path)
    return path.startswith("/") and (normal == WORKSPACE or normal.startswith(WORKSPACE + "/"))


def sandbox_info(info: dict[str, Any]) -> SandboxInfo:
    labels = info.get("labels") or {}
    return SandboxInfo(
        sandbox_id=str(info["id"]),
        name=str(info.get("name") or ""),
        state=_SANDBOX_STATES.get(str(info.get("state") or ""), "starting"),
        stop_reason=info.get("stopReason"),
        labels={str(k): str(v) for k, v in labels.items()},
        created_at=parse_time(info.get("createdAt")),
        lease_ends_at=parse_time(info.get("endsAt") or info.get("expiresAt")),
    )


def lease_left(info: dict[str, Any]) -> float | None:
    """Seconds until the lease ends, by the worker's clock; None without a time limit."""
    ends = parse_time(info.get("endsAt") or info.get("expiresAt"))
    if ends is None:
        return None
    if ends.tzinfo is None:
        ends = ends.replace(tzinfo=UTC)
    return (ends - datetime.now(UTC)).total_seconds()


def process_info(info: dict[str, Any]) -> ProcessInfo:
    exit_code = info.get("exitCode")
    state = _PROCESS_STATES.get(str(info.get("state") or ""))
    if state is None:
        state = "exited" if exit_code is not None else "running"
    return ProcessInfo(
        process_id=str(info["id"]),
        state=state,
        exit_code=int(exit_code) if exit_code is not None else None,
        ended_at=_unix_seconds(info.get("endedAt")),
    )


def _unix_seconds(value: Any) -> float | None:
    """An `endedAt` (ISO 8601, or Unix seconds) as Unix seconds; None if unreadable."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    when = parse_time(value)
    if when is None:
        return None
    return (when if when.tzinfo is not None else when.replace(tzinfo=UTC)).timestamp()


def parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        found = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return found if found.tzinfo is not None else found.replace(tzinfo=UTC)
