"""The rules the real Runtime API enforces, as switches of the fake (all on by default).

A fake that accepts what the real service refuses hides bugs, so `Rules()` is strict; a test
about leniency turns one rule off (`Rules(check_ranges=False)`), and `Rules.lenient()` turns
them all off. `Rules` is mutable: a test may change a rule of a running fake
(`fake.rules.rate_limit = False`); the fake reads it on every request.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from fakes.runtime.network_rules import network_problems

# The create fields the SDK (withruntime 0.35.0) may send, camelCased.
CREATE_FIELDS = frozenset(
    {
        "name",
        "labels",
        "funding",
        "region",
        "vcpu",
        "memoryMiB",
        "diskMiB",
        "cpu",
        "cpuFloorMillis",
        "timeoutSeconds",
        "pausable",
        "idlePauseSeconds",
        "autoWake",
        "user",
        "persistent",
        "maxTotalCostMicros",
        "getOrCreate",
        "onLeaseEnd",
        "maxCostMicros",
        "network",
        "image",
        "snapshot",
        "spreadFrom",
        "volumes",
        "env",
        "tailscale",
        "secrets",
    }
)
WATCH_FIELDS = frozenset(
    {
        "path",
        "recursive",
        "events",
        "include",
        "exclude",
        "batchMs",
        "timeoutMs",
        "maxWatches",
        "id",
        "webhook",
    }
)
WATCH_EVENT_TYPES = frozenset({"create", "write", "remove", "rename", "chmod"})
LEASE_RANGE = (60, 3600)
DEFAULT_LEASE_SECONDS = 1800
VCPU_RANGE = (1, 16)
MEMORY_RANGE = (128, 65536)
MIN_DISK_MIB = 3072
MAX_EXEC_MS = 24 * 3600 * 1000
MAX_WATCH_MS = 24 * 3600 * 1000
DEFAULT_WATCH_MS = 3600 * 1000


@dataclass
class Rules:
    """What the fake enforces, each switchable, and the numbers of its limits."""

    # Create: unknown fields refused (400 invalid_request naming each).
    refuse_unknown_fields: bool = True
    # Create and wake: timeoutSeconds 60..3600, vcpu 1..16, memoryMiB 128..65536, diskMiB >= 3072.
    check_ranges: bool = True
    # A create's `network` of the documented shape only (`network_rules`; `PUT .../network`
    # holds to it always).
    check_network: bool = True
    # A stopped sandbox gives its name up (off: the stopped holder keeps it, and is reused).
    release_names_on_stop: bool = True
    # Leases end: onLeaseEnd "pause" pauses, "stop" stops with stopReason "lease_expired".
    leases_end: bool = True
    # A guest call (command, file, process) to a paused sandbox wakes it (off: 409
    # sandbox_paused, as for a sandbox created with autoWake false).
    wake_on_request: bool = True
    # `:wake` on a sandbox that is not paused answers 409 not_paused (off: the sandbox object).
    refuse_needless_wake: bool = True
    # A guest call to a stopped sandbox answers 409 sandbox_stopped: its disk is gone.
    refuse_stopped_guest: bool = True
    # `:extend` refuses a lease end more than an hour (+2 s) ahead of now.
    extend_limit: bool = True
    # A create, wake (`:wake`, or on request) or `:extend` that would commit money past the daily
    # spending limit, the credit or the trial answers 402 (see `money`); off: never refused.
    spending_limits: bool = True
    # `:exec` whose timeoutMs outlasts the lease answers 409 lease_too_short.
    commands_fit_lease: bool = True
    # Per key: `rate_per_second` with bursts of `burst`, `max_in_flight` served at once; a
    # request over the limit waits up to `max_queue_seconds`, then 429 rate_limited.
    rate_limit: bool = True
    rate_per_second: float = 50.0
    burst: int = 200
    max_in_flight: int = 128
    max_queue_seconds: float = 5.0
    # Watches: at most `max_watches` running per sandbox.
    max_watches: int = 4
    # A watch started with `webhook: true` is read by Runtime itself, at most once every
    # `file_hook_window_seconds`, into a `sandbox.files.changed` event of at most
    # `file_hook_events` changes. The public docs leave both numbers unstated
    # (`{{file-hook-window}}`, `{{file-hook-events}}`): these are the fake's assumption. So is
    # `max_hook_watches`, the account's limit on such watches (`{{file-hook-limit}}`; None:
    # none), past which a start answers 409 `too_many_watches`.
    file_hook_window_seconds: float = 5.0
    file_hook_events: int = 100
    max_hook_watches: int | None = None
    # A follow stream (watch events, process output) ends with `continue` after this long.
    stream_seconds: float = 110.0
    # The longest `waitMs` long-poll, and the longest `waitFor` hold.
    max_wait_ms: int = 8000
    max_hold_seconds: float = 60.0
    # How often watches scan the sandbox's folder and leases are checked (not a rule).
    poll_seconds: float = 0.05
    # A process's output is kept (and served) up to its last this many bytes.
    output_keep_bytes: int = 1024 * 1024
    # A snapshot is `capturing` this long before it is `ready` (the source must stay paused).
    snapshot_capture_seconds: float = 0.3
    # A process is reported running this long after it ended (0: at once). Runtime reports an
    # end a moment after the process's last write; how long under load is not published.
    exit_report_lag_seconds: float = 0.0

    @classmethod
    def lenient(cls, **numbers: Any) -> Rules:
        """Every rule off (limits kept as numbers, so turning one on again works)."""
        switches = {f.name: False for f in dataclasses.fields(cls) if f.type in (bool, "bool")}
        return cls(**(switches | numbers))


def create_problems(body: Any, rules: Rules) -> list[tuple[str, str]]:
    """What a create body gets wrong, as (field, message) pairs; empty when it is fine."""
    if not isinstance(body, dict):
        return [("body", "The body must be a JSON object.")]
    problems: list[tuple[str, str]] = []
    if rules.refuse_unknown_fields:
        for name in sorted(set(body) - CREATE_FIELDS):
            problems.append((name, f"Unknown field {name}."))
    if rules.check_ranges:
        problems += _range(body, "timeoutSeconds", *LEASE_RANGE)
        problems += _range(body, "vcpu", *VCPU_RANGE)
        problems += _range(body, "memoryMiB", *MEMORY_RANGE)
        problems += _range(body, "diskMiB", MIN_DISK_MIB, None)
    if rules.check_network and "network" in body:
        problems += network_problems(body["network"], "network.")
    lease_end = body.get("onLeaseEnd", "pause")
    if lease_end not in ("pause", "stop"):
        problems.append(("onLeaseEnd", 'onLeaseEnd must be "pause" or "stop".'))
    name = body.get("name")
    if name is not None and (not isinstance(name, str) or not name or len(name) > 128):
        problems.append(("name", "name must be a string of 1 to 128 characters."))
    if body.get("getOrCreate") and name is None:
        problems.append(("name", "getOrCreate needs a name."))
    labels = body.get("labels")
    if labels is not None and not (
        isinstance(labels, dict)
        and all(isinstance(k, str) and isinstance(v, str) for k, v in labels.items())
    ):
        problems.append(("labels", "labels must map strings to strings."))
    for flag in ("autoWake", "getOrCreate", "persistent"):
        if flag in body and not isinstance(body[flag], bool):
            problems.append((flag, f"{flag} must be true or false."))
    return problems


def lease_problems(body: dict[str, Any], rules: Rules) -> list[tuple[str, str]]:
    """A `timeoutSeconds` given outside a create (`:wake`)."""
    return _range(body, "timeoutSeconds", *LEASE_RANGE) if rules.check_ranges else []


def _range(body: dict[str, Any], field: str, low: int, high: int | None) -> list[tuple[str, str]]:
    if field not in body:
        return []
    value = body[field]
    if isinstance(value, bool) or not isinstance(value, int):
        return [(field, f"{field} must be an integer.")]
    if value < low or (high is not None and value > high):
        limit = f"at least {low}" if high is None else f"between {low} and {high}"
        return [(field, f"{field} must be {limit} (got {value}).")]
    return []
