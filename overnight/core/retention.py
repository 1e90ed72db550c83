"""How long a run's sandboxes are kept after it ends, and what `overnight reap` deletes.

At a run's end the sandboxes of its failed attempts (each paused when its attempt ended, kept
for a look) stay paused for `RunSpec.keep_failed_days`, labelled with the moment they may go
(`overnight-keep-until`, e.g. `20260105T031500Z`: letters and digits only, so every provider
takes it as a label). `overnight reap` reads the label, not the run, so it decides even when
the run's history is gone. Pure: no I/O; `verdict` is the whole rule reap applies.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from overnight.core.constants import LABEL_KEEP_UNTIL

_FORMAT = "%Y%m%dT%H%M%SZ"


def keep_until(ended_at: datetime, days: int) -> datetime:
    """When a failed attempt's sandbox of a run that ended at `ended_at` may be deleted."""
    return ended_at + timedelta(days=days)


# Runtime's `:retention` takes 1 to 365 whole days.
PROVIDER_DAYS = (1, 365)


def provider_days(until: datetime, created_at: datetime | None, now: datetime) -> int:
    """The days to ask a provider that deletes paused sandboxes itself (Runtime's
    `:retention`) to keep one that may go at `until`: whole days from the sandbox's creation
    (it paused after it, and Runtime may count from the pause or from the call), so the
    provider never deletes it before `until`; within 1 to 365 (past a year, reap deletes it)."""
    since = min(created_at or now, now)
    days = math.ceil((until - since).total_seconds() / 86400)
    low, high = PROVIDER_DAYS
    return max(low, min(high, days))


def label_value(when: datetime) -> str:
    """`when` as a label value: UTC, to the second, letters and digits only."""
    return when.astimezone(UTC).strftime(_FORMAT)


def parse_label(value: str | None) -> datetime | None:
    """The moment a keep-until label names; None for no label, or one that is not a moment."""
    if not value:
        return None
    try:
        return datetime.strptime(value, _FORMAT).replace(tzinfo=UTC)
    except ValueError:
        return None


@dataclass(frozen=True)
class Verdict:
    """What reap does with one sandbox: delete it (stop it, on Runtime) or keep it, and why."""

    delete: bool
    why: str


@dataclass(frozen=True)
class RunEnd:
    """What reap knows of a sandbox's run from Temporal.

    `clean`: it ended through its own end (finished or cancelled), so what it left paused it
    kept on purpose and labelled; otherwise (terminated, failed, timed out) it could not, and
    reap keeps its paused sandboxes `keep_failed_days` (its spec's) from `closed_at` in its
    stead. `known=False`: Temporal no longer has the run."""

    open: bool = False
    clean: bool = False
    known: bool = True
    closed_at: datetime | None = None
    keep_failed_days: int | None = None


def verdict(
    state: str,
    labels: dict[str, str],
    run: RunEnd,
    *,
    now: datetime,
    include_paused: bool = False,
) -> Verdict:
    """The rule `overnight reap` applies to a sandbox of `state` carrying `labels`:

    - one labelled keep-until is kept until then and deleted after, whatever its run;
    - otherwise one of an open run is the run's own business;
    - one still running (or starting) of a closed run is deleted: nobody supervises it;
    - a paused one of a run that ended cleanly, unlabelled, was kept on purpose
      (`keep_sandboxes`): kept until `reap --paused`;
    - a paused one of a run that could not clean up (terminated, failed, timed out) is kept
      its spec's `keep_failed_days` from the run's close, as the run would have; one of a run
      Temporal no longer knows is deleted;
    - `--paused` deletes every paused sandbox of a closed run, retention or not.
    """
    until = parse_label(labels.get(LABEL_KEEP_UNTIL))
    if until is not None and until <= now:
        return Verdict(True, f"its retention ended {_day(until)}")
    if run.open:
        return Verdict(False, "its run is still open")
    if state in ("running", "starting"):
        return Verdict(True, "its run is closed and nobody supervises it")
    if state != "paused":
        return Verdict(False, f"it is {state}")
    if include_paused:
        return Verdict(True, "its run is closed (reap --paused)")
    if until is None and not run.clean:
        if not run.known:
            return Verdict(True, "its run is gone from Temporal")
        if run.closed_at is not None and run.keep_failed_days is not None:
            until = keep_until(run.closed_at, run.keep_failed_days)
            if until <= now:
                return Verdict(True, f"its retention ended {_day(until)} (run closed uncleanly)")
    if until is not None:
        return Verdict(False, f"kept for a look until {_day(until)}")
    return Verdict(False, "kept on purpose (keep_sandboxes): reap --paused deletes it")


def _day(when: datetime) -> str:
    return f"{when.astimezone(UTC):%Y-%m-%d %H:%M} UTC"


def ref_verdict(
    run: RunEnd, keep_days: int | None, *, now: datetime, include_paused: bool = False
) -> Verdict:
    """The rule `overnight reap` applies to a run's kept-workspace refs (`refs/overnight/<run>/*`):
    kept while the run is open, and `keep_days` (its spec's `keep_failed_days`) after it
    closed, however it ended; deleted once that has passed, when Temporal no longer knows the
    run, or (`--paused`) as soon as the run is closed."""
    if run.open:
        return Verdict(False, "its run is still open")
    if not run.known:
        return Verdict(True, "its run is gone from Temporal")
    if include_paused:
        return Verdict(True, "its run is closed (reap --paused)")
    if run.closed_at is None or keep_days is None:
        return Verdict(False, "its run's retention is not known")
    until = keep_until(run.closed_at, keep_days)
    if until <= now:
        return Verdict(True, f"its retention ended {_day(until)}")
    return Verdict(False, f"kept until {_day(until)}")
