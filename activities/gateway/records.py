"""What the gateway reads of a sandbox's record (the local engine's
`$OVERNIGHT_HOME/sandboxes/<name>/sandbox.json`) to serve it: its grant of names, its git
origin, its model entry. Only a **running** sandbox's record counts: a token of a paused,
stopped or deleted sandbox is void.

A record is read again at each request (a sandbox stops at any moment, and its token must stop
with it), but its JSON is parsed again only when its bytes changed: a model call's lookup costs
one small read, not a parse (`RecordReader`).
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

from activities.gateway.model_origin import ModelOrigin, model_origin_of
from activities.gateway.origin import Origin
from activities.gateway.proxy import Grant

SANDBOXES = "sandboxes"
SANDBOX_FILE = "sandbox.json"
# A record larger than this is not a sandbox's (they are a few KiB).
MAX_RECORD = 1024 * 1024
FIRST_READ = 16 * 1024
# Parsed records kept (one per sandbox a gateway serves; a host runs far fewer).
MAX_KEPT = 4096


class RecordReader:
    """Reads running sandboxes' records of one home, keeping the last parse of each (by its
    exact bytes, so a change is always seen)."""

    def __init__(self, home: Path) -> None:
        self._root = os.path.join(os.fspath(home), SANDBOXES)
        self._kept: dict[str, tuple[bytes, dict[str, Any] | None]] = {}
        self._lock = threading.Lock()

    def running(self, sandbox: str) -> dict[str, Any] | None:
        """A running sandbox's record, read without a lock as its readers do; None for any
        other (no record, another state, a name that is not one)."""
        if not sandbox or "/" in sandbox or sandbox.startswith(".") or "\0" in sandbox:
            return None
        try:
            fd = os.open(os.path.join(self._root, sandbox, SANDBOX_FILE), os.O_RDONLY)
        except OSError:
            return None
        try:
            raw = os.read(fd, FIRST_READ)  # a record's size: no buffer of MAX_RECORD each time
            while len(raw) <= MAX_RECORD and (more := os.read(fd, MAX_RECORD + 1 - len(raw))):
                raw += more
        except OSError:
            return None
        finally:
            os.close(fd)
        with self._lock:
            kept = self._kept.get(sandbox)
            if kept is not None and kept[0] == raw:
                return kept[1]
        meta = _running_of(raw)
        with self._lock:
            if len(self._kept) >= MAX_KEPT:
                self._kept.clear()
            self._kept[sandbox] = (raw, meta)
        return meta

    def model_origin(self, sandbox: str) -> ModelOrigin | None:
        """What the model routes serve a running sandbox (None: nothing, or it does not run)."""
        meta = self.running(sandbox)
        return None if meta is None else model_origin_of(meta.get("model"))

    def grant(self, sandbox: str) -> Grant | None:
        """What the sandbox may reach while it runs behind the gateway; None otherwise."""
        meta = self.running(sandbox)
        egress = None if meta is None else meta.get("egress")
        if not isinstance(egress, list):
            return None
        return Grant(egress=tuple(str(pattern) for pattern in egress))

    def origin(self, sandbox: str) -> Origin | None:
        """The origin the gateway serves a running sandbox (None: none, or it does not run)."""
        meta = self.running(sandbox)
        found = None if meta is None else meta.get("git_origin")
        return origin_of(found) if isinstance(found, dict) else None


def _running_of(raw: bytes) -> dict[str, Any] | None:
    if len(raw) > MAX_RECORD:
        return None
    try:
        meta = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(meta, dict) or meta.get("state") != "running":
        return None
    return meta


def origin_of(record: dict[str, Any]) -> Origin | None:
    """The origin a sandbox's record (`git_origin`) names."""
    try:
        return Origin(
            path=str(record.get("path", "")),
            branch=str(record["branch"]),
            run_id=str(record["run_id"]),
            url=str(record.get("url", "")),
            credential_env=str(record.get("credential_env", "")),
        )
    except (KeyError, TypeError, AttributeError):
        return None
