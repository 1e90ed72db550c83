"""A coding agent's session store on Runtime, where nothing of the worker is mounted.

On the local provider the run's store (`$OVERNIGHT_HOME/sessions/<run_id>/`) is bound into
the sandbox and the adapter copies the CLI's session file there itself. On Runtime the adapter
copies it to `/workspace/.overnight/session/` in the sandbox, and the worker carries it:

- **out**, after each checkpoint the worker reads (the observe activity's, and the salvage at
  an attempt's end): the checkpoint names the session file (`coding_agent.session_file`: its
  path in the store, size and SHA-256), and when that digest is new the worker downloads the
  file through the file API into the run's store on the worker. The checkpoint, and so
  workflow history, holds only that id and digest, never the transcript.
- **in**, at each create: the worker uploads its store into the new sandbox before the
  adapter starts, and the adapter resumes the same session from it.

A download is the whole file (the API reads no ranges), once per checkpoint that changed the
session: a transcript of 150 KB after two turns costs 150 KB then. What the checkpoint
names is checked: a relative path inside the store, and the bytes it recorded (a prefix of
what is downloaded) with its digest, so an agent cannot make the worker write elsewhere; only
that prefix is stored. A path the store cannot take (a checkpoint naming `s` after one naming
`s/x`, or the other way) is logged and left out, never raised: the checkpoint is read already.
The store holds at most `MAX_STORE_BYTES` on the worker, however many paths the checkpoints
name: a new file that would pass it first evicts the oldest files pulled (the session resumed
is the latest named); the run frees the store at its end (activities.sandbox.lifecycle).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from temporalio import activity

from activities.coding_agent.setup import RUNTIME_SESSION_STORE
from activities.providers.protocol import ProviderError, SandboxProvider

# What the worker keeps of what it pulled: the digest each file had at its last checkpoint.
PULLED_INDEX = ".overnight-pulled.json"
# A session file larger than this is not carried (the run then resumes seeded).
MAX_SESSION_BYTES = 64 * 1024 * 1024
# The most a run's store holds on the worker (the oldest files pulled make room for a new one).
MAX_STORE_BYTES = MAX_SESSION_BYTES
# A path part the CLIs use (`-workspace-app`, `2026`, `<id>.jsonl`): none starts with a dot.
_SAFE_PART = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9._-]{0,200}$")
_DIGEST = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class SessionFile:
    path: str  # relative to the store (and the CLI's home)
    size: int
    sha256: str


def session_file_of(checkpoint_text: str | None) -> SessionFile | None:
    """The session file a coding agent's checkpoint names, when it names a sane one."""
    if not checkpoint_text:
        return None
    try:
        data = json.loads(checkpoint_text)
    except ValueError:
        return None
    state = data.get("coding_agent") if isinstance(data, dict) else None
    found = state.get("session_file") if isinstance(state, dict) else None
    if not isinstance(found, dict):
        return None
    path, size, digest = found.get("path"), found.get("bytes"), found.get("sha256")
    if not isinstance(path, str) or not is_safe_relative(path):
        return None
    if isinstance(size, bool) or not isinstance(size, int) or not 0 < size <= MAX_SESSION_BYTES:
        return None
    if not isinstance(digest, str) or not _DIGEST.match(digest):
        return None
    return SessionFile(path, size, digest)


def is_safe_relative(path: str) -> bool:
    parts = path.split("/")
    return 0 < len(parts) <= 8 and all(_SAFE_PART.match(part) for part in parts)


async def pull_session(
    provider: SandboxProvider,
    sandbox_id: str,
    store: Path,
    checkpoint_text: str | None,
    *,
    seen_running: bool = False,
) -> int:
    """Bring the run's store up to the session file the checkpoint names; the bytes stored
    (0: nothing new, or nothing to take). Best effort: a failure is logged, never raised,
    since the checkpoint itself was read and the run goes on without the copy (a fresh
    sandbox then resumes from the last copy, or seeded from the checkpoint)."""
    named: SessionFile | None = None
    try:
        named = session_file_of(checkpoint_text)  # JSON nested past the stack's depth too
        if named is None:
            return 0
        return await _pull(provider, sandbox_id, store, named, seen_running)
    except Exception as error:  # noqa: BLE001 - the agent's paths and the disk, whatever fails
        what = f"session file {named.path}" if named is not None else "the session file"
        _warn(f"{what} not copied from {sandbox_id}: {error!r}")
        return 0


async def _pull(
    provider: SandboxProvider,
    sandbox_id: str,
    store: Path,
    named: SessionFile,
    seen_running: bool,
) -> int:
    index = _read_index(store)
    if index.get(named.path) == named.sha256:
        return 0
    try:
        read = await provider.read_file(
            sandbox_id,
            f"{RUNTIME_SESSION_STORE}/{named.path}",
            MAX_SESSION_BYTES,
            seen_running=seen_running,
        )
    except ProviderError as error:
        _warn(f"session file {named.path} not copied from {sandbox_id}: {error}")
        return 0
    data = read.data if read.status == "ok" else None
    if data is None or len(data) < named.size:
        _warn(f"session file {named.path} not copied from {sandbox_id}: {read.status}")
        return 0
    # Only what the checkpoint vouches for: the file may have grown since (the CLI appends to
    # its transcript), and what follows the checked prefix is nobody's word.
    checked = data[: named.size]
    if hashlib.sha256(checked).hexdigest() != named.sha256:
        _warn(f"session file {named.path} in {sandbox_id} is not the one its checkpoint names")
        return 0
    _make_room(store, index, named.path, len(checked))
    await _write_atomically(store / named.path, checked)
    index[named.path] = named.sha256
    await _write_atomically(store / PULLED_INDEX, json.dumps(index, sort_keys=True).encode())
    return len(checked)


async def push_sessions(provider: SandboxProvider, sandbox_id: str, store: Path) -> bool:
    """Upload the run's store into a new sandbox (before its adapter starts); False when the
    store holds no session yet."""
    if not any(p.is_file() and p.name != PULLED_INDEX for p in store.rglob("*")):
        return False
    await provider.upload_dir(sandbox_id, str(store), RUNTIME_SESSION_STORE)
    return True


def _make_room(store: Path, index: dict[str, str], path: str, size: int) -> None:
    """Evict the oldest files pulled before (by when they were stored) until they and `size`
    more fit in `MAX_STORE_BYTES`; each leaves the index too."""
    held: list[tuple[float, str, int]] = []
    for kept in index:
        if kept == path:
            continue
        try:
            info = os.lstat(store / kept)
        except OSError:
            continue
        held.append((info.st_mtime, kept, info.st_size))
    total = size + sum(held_size for _, _, held_size in held)
    for _, kept, kept_size in sorted(held):
        if total <= MAX_STORE_BYTES:
            break
        try:
            (store / kept).unlink(missing_ok=True)
        except OSError:
            continue
        del index[kept]
        total -= kept_size


def _read_index(store: Path) -> dict[str, str]:
    try:
        found = json.loads((store / PULLED_INDEX).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}


async def _write_atomically(path: Path, data: bytes) -> None:
    def write() -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, temp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, path)

    await asyncio.to_thread(write)


def _warn(message: str) -> None:
    if activity.in_activity():
        activity.logger.warning(message)
