"""Who goes in next: the places of one worker pool, the runs holding them and the runs waiting.

Pure: the `OvernightAdmission` workflow keeps a `Places` (carried whole by continue-as-new)
and asks this module what to do. The order: the lowest `priority` first (1 before 5); among
runs of that priority, the owner holding the fewest places (ties: the owner let in longest
ago), and that owner's runs first come, first served. A run counted against a Runtime key
waits while its key is full, without holding up runs that are not. The limits and the bounds
on owner and priority are the pool's workers' (`set_limits`); admission workflows begun before
took the limits of the latest request.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from overnight.core.admission import (
    DEFAULT_CHECK_SECONDS,
    AdmissionRequest,
    AdmissionSettings,
    bounded_order,
)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Waiting(_Model):
    holder: str
    owner: str = ""
    priority: int = 3
    key: str | None = None
    # Arrival order.
    seq: int


class Holding(_Model):
    owner: str = ""
    key: str | None = None
    # When it was let in, in the pool's count of events (not the clock: pure and replayable).
    seq: int


class Places(_Model):
    waiting: list[Waiting] = Field(default_factory=list)
    holding: dict[str, Holding] = Field(default_factory=dict)
    max_runs: int | None = None
    max_runs_per_key: int | None = None
    check_seconds: float = DEFAULT_CHECK_SECONDS
    seq: int = 0
    # The seq at which each owner was last let in (fairness between owners holding as many).
    owner_last_in: dict[str, int] = Field(default_factory=dict)
    admitted_total: int = 0
    taken_back_total: int = 0
    # The most places held at once (the limit, once the pool has been full).
    most_held: int = 0
    # The worker's bounds on the order a request may claim (`overnight.core.admission.
    # bounded_order`): the most urgent priority but for the urgent owners, the owners known.
    max_priority: int = 1
    urgent_owners: list[str] = Field(default_factory=list)
    owners: list[str] | None = None


def set_limits(places: Places, settings: AdmissionSettings) -> None:
    """The pool's limits and bounds, as its worker has them."""
    places.max_runs = settings.max_runs
    places.max_runs_per_key = settings.max_runs_per_key
    places.check_seconds = settings.check_seconds
    places.max_priority = settings.max_priority
    places.urgent_owners = list(settings.urgent_owners)
    places.owners = None if settings.owners is None else list(settings.owners)


def ask(places: Places, request: AdmissionRequest, *, take_limits: bool = True) -> bool:
    """Note `request`, its owner and priority held to the pool's bounds (`take_limits`: the
    asker's limits become the pool's, as admission workflows begun before did). True when its
    holder already holds a place: tell it again, count nothing twice."""
    if take_limits:
        places.max_runs = request.max_runs
        places.max_runs_per_key = request.max_runs_per_key
        places.check_seconds = request.check_seconds
    if request.holder in places.holding:
        return True
    if any(w.holder == request.holder for w in places.waiting):
        return False
    places.seq += 1
    owner, priority = bounded_order(_bounds(places), request.owner, request.priority)
    places.waiting.append(
        Waiting(
            holder=request.holder,
            owner=owner,
            priority=priority,
            key=request.key,
            seq=places.seq,
        )
    )
    return False


def in_places(places: Places, holder: str) -> bool:
    """`holder` holds a place or waits for one."""
    return holder in places.holding or any(w.holder == holder for w in places.waiting)


def _bounds(places: Places) -> AdmissionSettings:
    return AdmissionSettings(
        max_priority=places.max_priority, urgent_owners=places.urgent_owners, owners=places.owners
    )


def give_back(places: Places, holder: str) -> bool:
    """`holder` is done (or no longer waits): its place or its turn goes. True if it had one."""
    before = len(places.waiting)
    places.waiting = [w for w in places.waiting if w.holder != holder]
    return places.holding.pop(holder, None) is not None or len(places.waiting) != before


def take_back(places: Places, closed: list[str]) -> list[str]:
    """The places of holders whose workflow closed without giving them back."""
    taken = [holder for holder in closed if places.holding.pop(holder, None) is not None]
    places.taken_back_total += len(taken)
    return taken


def let_in(places: Places) -> list[str]:
    """Move every waiting run that fits now to `holding`, in admission order; their holders."""
    admitted: list[str] = []
    while True:
        chosen = _next(places)
        if chosen is None:
            return admitted
        places.waiting.remove(chosen)
        places.seq += 1
        places.holding[chosen.holder] = Holding(owner=chosen.owner, key=chosen.key, seq=places.seq)
        places.owner_last_in[chosen.owner] = places.seq
        places.admitted_total += 1
        places.most_held = max(places.most_held, len(places.holding))
        admitted.append(chosen.holder)


def is_full(places: Places) -> bool:
    """Runs wait and none of them fits: only a place given or taken back lets one in."""
    return bool(places.waiting) and _next(places) is None


def _next(places: Places) -> Waiting | None:
    if places.max_runs is not None and len(places.holding) >= places.max_runs:
        return None
    by_key: dict[str, int] = {}
    by_owner: dict[str, int] = {}
    for held in places.holding.values():
        by_owner[held.owner] = by_owner.get(held.owner, 0) + 1
        if held.key is not None:
            by_key[held.key] = by_key.get(held.key, 0) + 1
    limit = places.max_runs_per_key
    fits = [
        w for w in places.waiting if w.key is None or limit is None or by_key.get(w.key, 0) < limit
    ]
    if not fits:
        return None
    first = min(w.priority for w in fits)
    return min(
        (w for w in fits if w.priority == first),
        key=lambda w: (by_owner.get(w.owner, 0), places.owner_last_in.get(w.owner, 0), w.seq),
    )
