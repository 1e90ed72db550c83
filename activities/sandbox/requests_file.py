"""Reading the agent kit's requests file (overnight.core.agent_requests.requests_path) through a
provider, with the checkpoint's rules.

The file is agent bytes, read like the checkpoint: without following a link, only a regular
file, at most `MAX_REQUESTS_BYTES` (a larger one is refused after a stat), UTF-8, JSON nested
no deeper than the checkpoint's limit; the values of the run's `secret_env` are redacted from
its text before it is parsed, and only what it asks (clipped to the limits) leaves the worker,
never its text. One file holds every request, so however often the agent rewrites it, a read
is one bounded file, at most once per `poll_seconds`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from activities.gateway.service import redacted_tokens
from activities.models import RequestsRead
from activities.providers.protocol import (
    FileRead,
    SandboxNotFound,
    SandboxNotRunning,
    SandboxProvider,
)
from activities.sandbox_base.checkpoints import checkpoint_from
from overnight.core.agent_requests import MAX_REQUESTS_BYTES, requests_in
from overnight.core.checkpoint_text import parse
from overnight.core.output_tail import secret_values

# The digest a missing file is known by: its going is news once, then not again (nor is its
# absence news to a run that has seen none yet).
MISSING = "missing"


def requests_from(
    read: FileRead, known_digest: str | None, secrets: Sequence[str] = ()
) -> RequestsRead:
    """What a capped read of the requests file asks, relative to `known_digest`."""
    if read.status == "missing":
        status = "unchanged" if known_digest in (None, MISSING) else "missing"
        return RequestsRead(status=status, digest=MISSING)
    found = checkpoint_from(read, known_digest, secrets)
    if found.status == "unchanged":
        return RequestsRead(status="unchanged", digest=found.digest)
    if found.status != "ok" or found.text is None:
        why = _refusal(found.status, found.detail, found.size)
        return RequestsRead(status=found.status, digest=found.digest, refused=why)
    ok, value = parse(found.text)
    if not ok:
        why = "the requests file is not JSON (or nests too deep)"
        return RequestsRead(status="unreadable", digest=found.digest, refused=why)
    asked = requests_in(value)
    return RequestsRead(status="ok", digest=found.digest, requests=asked, refused=asked.refused)


def changed(read: RequestsRead, known_digest: str | None) -> bool:
    """Whether a read is news for a workflow that has seen `known_digest`."""
    return read.status != "unchanged" and read.digest != known_digest


async def read_requests(
    provider: SandboxProvider,
    sandbox_id: str,
    path: str,
    known_digest: str | None,
    *,
    seen_running: bool = False,
    secret_env: Sequence[str] = (),
) -> RequestsRead:
    """Read the requests file; a gone sandbox, or one that may not be read now, reads as
    unchanged (no news: the workflow keeps what it knows)."""
    try:
        read = await provider.read_file(
            sandbox_id, path, MAX_REQUESTS_BYTES, seen_running=seen_running
        )
    except (SandboxNotFound, SandboxNotRunning):
        return RequestsRead(status="unchanged", digest=known_digest)
    secrets = secret_values(secret_env, os.environ) + redacted_tokens(sandbox_id)
    return requests_from(read, known_digest, secrets)


def _refusal(status: str, detail: str, size: int) -> str:
    if status == "too_large":
        return f"the requests file is {size} bytes, over the {MAX_REQUESTS_BYTES} cap"
    if status == "outside":
        return "the requests file's path leads outside the sandbox"
    return f"the requests file could not be read: {detail or 'not UTF-8 text'}"
