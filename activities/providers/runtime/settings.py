"""How much of a Runtime key one worker's watching may hold, from the worker's environment.

Runtime serves at most 128 requests at once per key (192 per organisation), and a request over
that waits up to 5 s, then gets a 429. A watch stream held open is one of them for as long as
it is read, so each worker holds at most `OVERNIGHT_RUNTIME_STREAMS` (default 30) and watches
every other run through its event feed, which holds nothing open and asks for the account's
events every `OVERNIGHT_RUNTIME_EVENTS_SECONDS` (default 1). The setting is per worker: the
workers sharing a key hold at most the sum of theirs, so size it as the key's ceiling (96 of
128, leaving 32 for creates, reads and everything else) divided by the workers, less a little
for the moment a closed stream and the next overlap at the server: the default, 30, is 90 for
3 workers. 0 watches every run through the feed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from activities.providers.protocol import ProviderError

STREAMS_VARIABLE = "OVERNIGHT_RUNTIME_STREAMS"
EVENTS_SECONDS_VARIABLE = "OVERNIGHT_RUNTIME_EVENTS_SECONDS"
DEFAULT_STREAMS = 30
DEFAULT_EVENTS_SECONDS = 1.0
# Runtime's per-key limit: no worker may hold more than this.
SERVED_AT_ONCE = 128


@dataclass(frozen=True)
class WatchSettings:
    streams: int = DEFAULT_STREAMS
    events_seconds: float = DEFAULT_EVENTS_SECONDS

    @classmethod
    def from_environment(cls) -> WatchSettings:
        streams = _number(STREAMS_VARIABLE, DEFAULT_STREAMS, 0, SERVED_AT_ONCE, whole=True)
        seconds = _number(EVENTS_SECONDS_VARIABLE, DEFAULT_EVENTS_SECONDS, 0.1, 60, whole=False)
        return cls(streams=int(streams), events_seconds=seconds)


def _number(name: str, default: float, low: float, high: float, *, whole: bool) -> float:
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    value: float | None
    try:
        value = int(text) if whole else float(text)
    except ValueError:
        value = None
    if value is None or not low <= value <= high:
        raise ProviderError(
            f"{name}={text!r}: must be a {'whole ' if whole else ''}number from "
            f"{low:g} to {high:g}",
            kind="RuntimeMisconfigured",
            retryable=False,
        )
    return value
