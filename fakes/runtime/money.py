"""The fake's model of Runtime billing: what each sandbox costs, and the account's money.

A deliberately simple model of what section 6 of the contract (and Runtime's API reference,
"Account") says, enough to test a client that reads `GET /v1/usage` and `GET /v1/limits` and
meets their 402s:

- **Prices** are held by the fake (`Prices`, per fake: `FakeRuntime(..., prices=Prices(...))`),
  in integer microdollars per vCPU-hour and per GiB-hour; the default is overnight's default
  `Rates` ($0.025 and $0.0075). A sandbox's price is `vcpu x vCPU-hour + memoryMiB/1024 x
  GiB-hour`, whole while it runs (no CPU floor, no idle discount, no paused storage).
- **Charged** (`chargedMicros`): a sandbox is billed only while it is running (not paused, not
  stopped), from its create or wake to its pause, stop, delete or lease end. The meter keeps
  whole milliseconds of running time and the charge is `floor(running ms x price / hour)`,
  worked out from the running time each time it is read (integer arithmetic: nothing drifts).
- **Held** (`heldMicros`): a running sandbox holds the cost of the rest of its current lease
  (at most an hour: no lease ends further ahead), so a wake (its fresh lease) and `:extend`
  (the added seconds) commit money as a create (its first lease) does; 0 once it is paused or
  stopped, the unused part going back.
- **The account**: `credited` (unlimited by default; `set_credit(micros)`), `spent` = every
  sandbox's charge, `held` = every sandbox's hold, `available` = credited - spent - held.
- **The daily limit** (`set_daily_limit(micros | None)`): `usedMicros` = charges settled plus
  money on hold, committed in the window. The 24-hour window cannot pass in a test, so a test
  reopens it: `forget_daily_spend()` forgets what was committed so far (the part of an old hold
  used up later is not counted again; a new hold is), `set_daily_used(micros)` makes it that.
- **Refusals** (`Rules.spending_limits`): a create, `:wake`, an automatic wake or `:extend`
  whose commitment exceeds what the daily limit has left answers 402
  `spending_limit_reached`; past the credit, `insufficient_funds`; with the trial used up
  (`exhaust_trial()`), `trial_exhausted`. A refused call changes and charges nothing.

Sandboxes changed behind the fake's back (a lease end, an engine pause) are seen when the
fake next looks at them; a lease end is billed up to the lease's end.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from datetime import datetime

# Microdollars: 1_000_000 is one dollar.
HOUR_MS = 3_600_000
MIB_PER_GIB = 1024
# A lease never ends more than an hour ahead, so no hold is for more.
MAX_HOLD_MS = 3600 * 1000
# What `credited` reads while the credit is unlimited ($1,000,000).
UNLIMITED_CREDIT_MICROS = 1_000_000_000_000
# The trial `exhaust_trial` shows used up (the fake's choice: 10 hours).
TRIAL_MS = 10 * 3600 * 1000


@dataclass(frozen=True)
class Prices:
    """Integer microdollars per vCPU-hour and per GiB-hour (overnight's default `Rates`)."""

    vcpu_hour_micros: int = 25_000
    gib_hour_micros: int = 7_500

    def per_hour_scaled(self, vcpu: int, memory_mib: int) -> int:
        """The sandbox's price an hour, in microdollars times 1024 (exact for any MiB)."""
        return vcpu * self.vcpu_hour_micros * MIB_PER_GIB + memory_mib * self.gib_hour_micros

    def cost(self, vcpu: int, memory_mib: int, milliseconds: int) -> int:
        """What running a sandbox of this size for `milliseconds` costs, rounded down."""
        return milliseconds * self.per_hour_scaled(vcpu, memory_mib) // (HOUR_MS * MIB_PER_GIB)

    def json(self) -> dict[str, str]:
        return {
            "vcpuHourMicros": str(self.vcpu_hour_micros),
            "gibHourMicros": str(self.gib_hour_micros),
        }


class SpendingRefused(Exception):
    """A 402: what the call would commit is past a limit. `details` go in the answer."""

    def __init__(self, code: str, message: str, hint: str, details: dict[str, str]) -> None:
        super().__init__(message)
        self.code, self.message, self.hint, self.details = code, message, hint, details


@dataclass
class Meter:
    """One sandbox's running time. Times are Unix seconds."""

    id: str
    name: str | None
    created_at: float
    vcpu: int
    memory_mib: int
    state: str = "running"
    settled_ms: int = 0  # running time of closed stretches
    running_since: float | None = None
    lease_end: float | None = None
    # What was already committed when the daily window last reopened (see `Billing.forget`).
    window_base: int = 0

    def running_ms(self, now: float) -> int:
        open_ms = 0 if self.running_since is None else int((now - self.running_since) * 1000)
        return self.settled_ms + max(0, open_ms)


def ms(seconds: float) -> int:
    return max(0, int(seconds * 1000))


class Billing:
    """Every sandbox's meter and the account's money. Thread-safe: tests set limits from
    their own thread while the fake's loop bills."""

    def __init__(self, prices: Prices | None = None) -> None:
        self.prices = prices or Prices()
        self.lock = threading.Lock()
        self.meters: dict[str, Meter] = {}
        self.credit: int | None = None  # None: unlimited
        self.daily_limit: int | None = None
        self.daily_extra = 0  # added to the window by `set_daily_used`
        self.trial_exhausted = False

    # --- the meters ---

    def observe(
        self,
        sandbox_id: str,
        state: str,
        lease_end: datetime | None,
        *,
        name: str | None,
        created_at: float,
        vcpu: int,
        memory_mib: int,
    ) -> None:
        """What the fake now sees of a sandbox: a meter starts when it runs (created or woken)
        and stops when it does not (at its lease end, if that has passed)."""
        now = time.time()
        end = None if lease_end is None else lease_end.timestamp()
        with self.lock:
            meter = self.meters.get(sandbox_id)
            if meter is None:
                meter = Meter(sandbox_id, name, created_at, vcpu, memory_mib, state="new")
                self.meters[sandbox_id] = meter
            running = state == "running"
            if running and meter.running_since is None:
                meter.running_since = now
                # A wake's hold is new money: the window counts it (see `forget`).
                meter.window_base = min(meter.window_base, self._charged(meter, now))
            elif not running and meter.running_since is not None:
                stopped_at = now if end is None else max(meter.running_since, min(now, end))
                meter.settled_ms = meter.running_ms(stopped_at)
                meter.running_since = None
            meter.state, meter.lease_end = state, end

    def add_running_time(self, sandbox_id: str, seconds: float) -> None:
        """Bill the sandbox as if it had run `seconds` more (its lease is left as it is)."""
        with self.lock:
            self.meters[sandbox_id].settled_ms += ms(seconds)

    def running_ids(self) -> list[str]:
        with self.lock:
            return [m.id for m in self.meters.values() if m.running_since is not None]

    def _charged(self, meter: Meter, now: float) -> int:
        return self.prices.cost(meter.vcpu, meter.memory_mib, meter.running_ms(now))

    def _held(self, meter: Meter, now: float) -> int:
        if meter.running_since is None or meter.lease_end is None:
            return 0
        left = min(ms(meter.lease_end - now), MAX_HOLD_MS)
        return self.prices.cost(meter.vcpu, meter.memory_mib, left)

    def figures(self, sandbox_id: str) -> tuple[int, int, int]:
        """(running ms, charged micros, held micros) of one sandbox now."""
        now = time.time()
        with self.lock:
            meter = self.meters[sandbox_id]
            return meter.running_ms(now), self._charged(meter, now), self._held(meter, now)

    def newest(self, count: int) -> list[Meter]:
        with self.lock:
            meters = sorted(self.meters.values(), key=lambda m: (m.created_at, m.id))
        return meters[::-1][:count]

    # --- the account ---

    def totals(self) -> tuple[int, int]:
        """(spent, held) over every sandbox."""
        now = time.time()
        with self.lock:
            meters = list(self.meters.values())
            return sum(self._charged(m, now) for m in meters), sum(
                self._held(m, now) for m in meters
            )

    def daily_used(self) -> int:
        """Charges settled plus money on hold, committed since the window last reopened."""
        now = time.time()
        with self.lock:
            committed = sum(
                max(0, self._charged(m, now) + self._held(m, now) - m.window_base)
                for m in self.meters.values()
            )
            return committed + self.daily_extra

    def forget(self, used: int = 0) -> None:
        """The daily window reopens: what was committed so far no longer counts (a hold's
        later charges are part of it), and `used` is counted instead."""
        now = time.time()
        with self.lock:
            for meter in self.meters.values():
                meter.window_base = self._charged(meter, now) + self._held(meter, now)
            self.daily_extra = used

    def sandbox_cost(self, vcpu: int, memory_mib: int, seconds: float) -> int:
        return self.prices.cost(vcpu, memory_mib, ms(seconds))

    def needs_checking(self) -> bool:
        """Whether any refusal could happen (else nothing need be looked at first)."""
        return self.trial_exhausted or self.daily_limit is not None or self.credit is not None

    def require(self, micros: int, what: str) -> None:
        """Refuse (SpendingRefused) committing `micros` for `what` past the trial, the daily
        limit or the credit."""
        if self.trial_exhausted:
            raise SpendingRefused(
                "trial_exhausted",
                f"The free trial is used up: {what} needs credit.",
                "add credit at https://withruntime.com/account/billing",
                {"neededMicros": str(micros)},
            )
        limit = self.daily_limit
        if limit is not None:
            used = self.daily_used()
            left = max(0, limit - used)
            if micros > left:
                raise SpendingRefused(
                    "spending_limit_reached",
                    f"{what} would commit {micros} microdollars, past this key's daily "
                    f"spending limit ({limit}; {used} used in the last 24 hours, {left} left).",
                    "read GET /v1/limits",
                    {
                        "limitMicros": str(limit),
                        "usedMicros": str(used),
                        "remainingMicros": str(left),
                        "neededMicros": str(micros),
                    },
                )
        if self.credit is not None:
            spent, held = self.totals()
            available = max(0, self.credit - spent - held)
            if micros > available:
                raise SpendingRefused(
                    "insufficient_funds",
                    f"{what} would commit {micros} microdollars; the account has "
                    f"{available} available.",
                    "read GET /v1/limits; add credit at https://withruntime.com/account/billing",
                    {"availableMicros": str(available), "neededMicros": str(micros)},
                )
