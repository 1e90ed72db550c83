"""Reading the agent's checkpoint through a provider, and deciding whether it changed.

`digest` is the sha256 of the bytes when they were read. A checkpoint that cannot be taken
still gets a fingerprint (`too_large:<size>`, `outside`, `refused:<why>`), so a workflow that
remembers it is not told about the same refusal on every look. A missing checkpoint has none:
its absence is never news (the last good copy stays).

The text is agent bytes. Before it leaves the worker every value of the run's `secret_env`
in it is replaced by `***` (the status, the result and the history never hold one), and what
it says is read here with limits (`CheckpointRead.facts`, overnight.core.checkpoint_text), so the
workflow parses nothing an agent wrote.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator, Sequence
from typing import Any

import pydantic_core

from activities.gateway.service import redacted_tokens
from activities.models import CheckpointRead
from activities.providers.protocol import (
    FileRead,
    SandboxNotFound,
    SandboxNotRunning,
    SandboxProvider,
)
from overnight.core.checkpoint_text import CheckpointFacts, facts_of, parse
from overnight.core.models import CheckpointSummary
from overnight.core.output_tail import holds_secret, redact, secret_values, with_json_forms

# The most a checkpoint's text may take in a payload (as JSON): Temporal refuses payloads
# over 2 MB, and the run's state carries the checkpoint beside a few KiB of its own.
MAX_PAYLOAD_BYTES = 1536 * 1024


def checkpoint_from(
    read: FileRead, known_digest: str | None, secrets: Sequence[str] = ()
) -> CheckpointRead:
    """What a capped file read means as a checkpoint, relative to `known_digest`, with the
    values in `secrets` redacted from its text."""
    if read.status == "missing":
        return CheckpointRead(status="missing")
    if read.status == "outside":
        result = CheckpointRead(status="outside", digest="outside")
    elif read.status == "refused":
        why = read.detail or "not a regular file"
        result = CheckpointRead(status="unreadable", digest=f"refused:{why}", detail=why)
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
        if secrets:
            text = _unspelled(redact(text, with_json_forms(secrets)), secrets)
        carried = len(pydantic_core.to_json(text))
        if carried > MAX_PAYLOAD_BYTES:
            # Control characters take six bytes each as JSON: such a checkpoint under the
            # byte cap could still make a payload Temporal refuses (2 MB).
            return CheckpointRead(
                status="unreadable",
                digest=digest,
                size=len(data),
                detail=f"it takes {carried} bytes as JSON, over the {MAX_PAYLOAD_BYTES} a "
                "history payload may carry",
            )
        facts = _redacted(facts_of(text), secrets)
        return CheckpointRead(status="ok", digest=digest, size=len(data), text=text, facts=facts)
    if result.digest == known_digest:
        return CheckpointRead(status="unchanged", digest=result.digest, size=result.size)
    return result


def _redacted(facts: CheckpointFacts, secrets: Sequence[str]) -> CheckpointFacts:
    """The summary parsed from the text holds no secret either (a JSON escape can spell one)."""
    summary = facts.summary
    if not secrets or summary is None:
        return facts
    clean = CheckpointSummary(
        next=None if summary.next is None else redact(summary.next, secrets),
        last_note=None if summary.last_note is None else redact(summary.last_note, secrets),
    )
    return facts.model_copy(update={"summary": clean})


def _unspelled(text: str, secrets: Sequence[str]) -> str:
    """`text`, or (when what it parses to still holds a secret: a JSON escape spelled it, as
    Go's `\\u0026` for `&` or PHP's `\\/` for `/`, in the secret or its base64) its value with
    the secrets redacted, as JSON."""
    if "\\" not in text:
        return text  # no escape: redacting the text redacted its value
    ok, value = parse(text)
    if not ok or not _holds(value, secrets):
        return text
    return json.dumps(_redacted_value(value, secrets), indent=1)


def _holds(value: Any, secrets: Sequence[str]) -> bool:
    # Every text of the value in one search: a NUL (which no environment value holds) between
    # them, so no match spans two.
    return holds_secret("\0".join(_texts(value)), secrets)


def _texts(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _texts(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _texts(item)


def _redacted_value(value: Any, secrets: Sequence[str]) -> Any:
    if isinstance(value, str):
        return redact(value, secrets)
    if isinstance(value, list):
        return [_redacted_value(item, secrets) for item in value]
    if isinstance(value, dict):
        return {redact(key, secrets): _redacted_value(item, secrets) for key, item in value.items()}
    return value


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
    secret_env: Sequence[str] = (),
) -> CheckpointRead:
    """Read the checkpoint; a gone sandbox reads as missing, one that may not be read (a
    Runtime read would wake a paused sandbox) as unreadable, saying why. The values of the
    variables named in `secret_env` (in the worker's environment) are redacted from it."""
    try:
        read = await provider.read_file(sandbox_id, path, max_bytes, seen_running=seen_running)
    except SandboxNotFound:
        return CheckpointRead(status="missing", detail="the sandbox is gone")
    except SandboxNotRunning as error:
        return CheckpointRead(status="unreadable", detail=f"not read: the sandbox is {error.state}")
    secrets = secret_values(secret_env, os.environ) + redacted_tokens(sandbox_id)
    return checkpoint_from(read, known_digest, secrets)
