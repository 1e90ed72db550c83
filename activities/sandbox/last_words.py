"""Reading an ended agent's last words in the worker: bounded, redacted before they leave it.

Best effort: a tail that cannot be read is logged and left out, never failing the activity
that ends the attempt (its checkpoint matters more). A paused Runtime sandbox is not woken
for it unless the caller is waking it anyway (`may_wake`) and pauses it again afterwards.
"""

from __future__ import annotations

import logging
import os

from activities.gateway.service import redacted_tokens
from activities.models import OutputTail
from activities.providers.protocol import ProviderError, SandboxProvider
from activities.providers.registry import forensics_for
from overnight.core.output_tail import cut_tail, secret_values, window_bytes

logger = logging.getLogger(__name__)


async def read_last_words(
    provider: SandboxProvider,
    sandbox_id: str,
    process_id: str,
    secret_env: list[str],
    *,
    may_wake: bool,
) -> OutputTail | None:
    forensics = forensics_for(provider)
    if forensics is None:
        return None
    secrets = secret_values(secret_env, os.environ) + redacted_tokens(sandbox_id)
    try:
        if forensics.wakes_on_read and not may_wake:
            state = (await provider.sandbox(sandbox_id)).state
            if state != "running":
                return None  # reading it would wake it: its last words are not worth that
        chunk = await forensics.output_tail(sandbox_id, process_id, window_bytes(secrets))
    except (ProviderError, OSError) as error:
        # The message names the sandbox and the call, never output (which is not read).
        logger.warning(
            "could not read the last words of %s in %s: %s", process_id, sandbox_id, error
        )
        return None
    whole = chunk.next_cursor - len(chunk.data) <= 0
    tail = cut_tail(chunk.data, secrets, from_start=whole)
    return OutputTail(text=tail.text, truncated=tail.truncated)
