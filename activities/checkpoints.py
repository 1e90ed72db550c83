"""Reading the agent's checkpoint through a provider, and deciding whether it changed.

`digest` is the sha256 of the bytes when they were read. A checkpoint that cannot be taken
still gets a fingerprint (`too_large:<size>`, `outside`), so a workflow that remembers it is not
told about the same refusal on every look. A missing checkpoint has none: its absence is
never news (the last good copy stays).
"""

from __future__ import annotations

import hashlib

from activities.models import CheckpointRead
from activities.providers.protocol import (
    FileRead,
    SandboxNotFound,
    SandboxNotRunning,
    SandboxProvider,
)


def checkpoint_from(read: FileRead, known_digest: str | None) -> CheckpointRead:
    """What a capped file read means as a checkpoint, relative to `known_digest`."""
    if read.status == "missing":
        return CheckpointRead(status="missing")
    if read.status == "outside":
        result = CheckpointRead(status="outside", digest="outside")
    elif read.status == "too_large":
        result = CheckpointRead(status="too_large", digest=f"too_large:{read.size}", size=read.size)
    else:
        data = read.data or b""
        digest = hashlib.sha256(data).hexdigest()
        if digest == known_digest:
            return CheckpointRead(status="unchanged", digest=digest, size=len(data))
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as error:
            return CheckpointRead(
                status="unreadable", digest=digest, size=len(data), detail=f"({error.reason})"
            )
        return CheckpointRead(status="ok", digest=digest, size=len(data), text=text)
    if result.digest == known_digest:
        return CheckpointRead(status="unchanged", digest=result.digest, size=result.size)
    return result


def changed(read: CheckpointRead, known_digest: str | None) -> bool:
    """Whether a read is news for a workflow that has seen `known_digest`."""
    return read.status not in ("unchanged", "missing") and read.digest != known_digest


async def read_checkpoint(
    provider: SandboxProvider,
    sandbox_id: str,
    path: str,
    max_bytes: int,
    known_digest: str | None,
    *,
    seen_running: bool = False,
) -> CheckpointRead:
    """Read the checkpoint; a gone sandbox reads as missing, one that may not be read (a
    Runtime read would wake a paused sandbox) as unreadable, saying why."""
    try:
        read = await provider.read_file(sandbox_id, path, max_bytes, seen_running=seen_running)
    except SandboxNotFound:
        return CheckpointRead(status="missing", detail="the sandbox is gone")
    except SandboxNotRunning as error:
        return CheckpointRead(status="unreadable", detail=f"not read: the sandbox is {error.state}")
    return checkpoint_from(read, known_digest)
