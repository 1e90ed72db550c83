"""Admission: how many runs a worker pool lets go at once, and the messages that ask for a place.

A pool's limits are its workers' settings (read here from an environment, pure): at most
`OVERNIGHT_MAX_RUNS` runs of the task queue hold a sandbox at once, and at most
`OVERNIGHT_MAX_RUNS_PER_KEY` of its `runtime` runs per Runtime API key. Unset (or 0): no
limit, and runs start at once as they always did. Runs beyond a limit wait in state `queued`;
the pool's `OvernightAdmission` workflow (workflows/admission_run.py) lets them in as places free,
by `RunSpec.priority`, then fairly across `RunSpec.owner` (docs/admission.md).

The order a spec may claim is bounded by the pool's workers too: `OVERNIGHT_MAX_PRIORITY` is
the most urgent priority a spec may ask for (1: any), except for the owners listed in
`OVERNIGHT_URGENT_OWNERS`; `OVERNIGHT_OWNERS`, when set, lists the owners a spec may name
(besides none). A spec past them is refused at its start; a `request` signal past them (anyone
may send one) is held to them by the admission workflow, which takes every limit from its own
worker's settings (the `pool_settings` local activity), never from a signal.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field

from overnight.core.grants import BadSetting
from overnight.core.models import RunSpec
from overnight.core.provider_traits import traits

MAX_RUNS_ENV = "OVERNIGHT_MAX_RUNS"
MAX_RUNS_PER_KEY_ENV = "OVERNIGHT_MAX_RUNS_PER_KEY"
# How often a pool with runs waiting looks for holders whose workflow closed without giving
# their place back (terminated, timed out): their places are taken back.
CHECK_SECONDS_ENV = "OVERNIGHT_ADMISSION_CHECK_SECONDS"
DEFAULT_CHECK_SECONDS = 60.0
# The order a spec may claim: the most urgent priority (1 ... 5; 1: any), the owners who may
# claim any priority, and the owners a spec may name (unset: any).
MAX_PRIORITY_ENV = "OVERNIGHT_MAX_PRIORITY"
URGENT_OWNERS_ENV = "OVERNIGHT_URGENT_OWNERS"
OWNERS_ENV = "OVERNIGHT_OWNERS"

ADMISSION_WORKFLOW = "OvernightAdmission"
# Signals: a run asks for a place and gives it back (to the admission workflow); the admission
# workflow tells the run it is in (to the run).
REQUEST_SIGNAL = "request"
RELEASE_SIGNAL = "release"
ADMITTED_SIGNAL = "admitted"
# The admission workflow's status query.
PLACES_QUERY = "places"
# AgentRun's query: whether the run is in its pool (waiting for a place or holding one). The
# admission workflow asks it before freeing a place on a `release` signal, which carries no
# proof of who sent it.
IN_POOL_QUERY = "in_pool"


def admission_workflow_id(task_queue: str) -> str:
    """One admission workflow per worker pool (task queue)."""
    return f"overnight-admission-{task_queue}"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AdmissionSettings(_Model):
    """A worker's admission settings (None: no limit)."""

    max_runs: int | None = Field(default=None, gt=0)
    max_runs_per_key: int | None = Field(default=None, gt=0)
    check_seconds: float = Field(default=DEFAULT_CHECK_SECONDS, gt=0)
    # The most urgent priority a spec may claim, but for `urgent_owners`; the owners a spec may
    # name (None: any; none is always allowed).
    max_priority: int = Field(default=1, ge=1, le=5)
    urgent_owners: list[str] = Field(default_factory=list)
    owners: list[str] | None = None

    def limits(self, provider: str) -> bool:
        """Whether a run on `provider` is counted by any limit here."""
        return self.max_runs is not None or (
            self.max_runs_per_key is not None and traits(provider).counted_per_key
        )

    def describe(self) -> str:
        if self.max_runs is None and self.max_runs_per_key is None:
            return "no admission limit (every run starts at once)"
        pool = "unlimited" if self.max_runs is None else str(self.max_runs)
        key = "unlimited" if self.max_runs_per_key is None else str(self.max_runs_per_key)
        said = f"at most {pool} runs in this pool, {key} runtime runs per key"
        if self.max_priority > 1:
            urgent = ", ".join(self.urgent_owners) or "no owner"
            said += f"; priority {self.max_priority} at most urgent ({urgent} may claim 1)"
        if self.owners is not None:
            said += f"; owners {', '.join(self.owners) or '(none named)'}"
        return said


def bounded_order(settings: AdmissionSettings, owner: str, priority: int) -> tuple[str, int]:
    """The owner and priority a run asking for them is counted with: an owner not listed is
    counted as none, and a priority more urgent than the pool allows it as the pool's most."""
    if settings.owners is not None and owner not in settings.owners:
        owner = ""
    if owner and owner in settings.urgent_owners:
        return owner, priority
    return owner, max(priority, settings.max_priority)


def admission_refusals(spec: RunSpec, settings: AdmissionSettings) -> list[str]:
    """What of `spec`'s place in the queue the pool does not allow (checked at its start, with
    the grants, when it must ask for a place)."""
    if not settings.limits(spec.provider):
        return []
    found = []
    if settings.owners is not None and spec.owner and spec.owner not in settings.owners:
        found.append(f"owner {spec.owner!r}: not one of this pool's owners ({OWNERS_ENV})")
    owner, priority = bounded_order(settings, spec.owner, spec.priority)
    if priority != spec.priority:
        found.append(
            f"priority {spec.priority}: this pool's most urgent is {settings.max_priority} "
            f"for owner {spec.owner!r} ({MAX_PRIORITY_ENV}, {URGENT_OWNERS_ENV})"
        )
    return found


class AdmissionTerms(_Model):
    """What a run must ask for: a place in `workflow_id`'s pool, counted against `key` too
    when it has one (a Runtime key's fingerprint, never the key)."""

    workflow_id: str
    task_queue: str
    max_runs: int | None = None
    key: str | None = None
    max_runs_per_key: int | None = None
    check_seconds: float = DEFAULT_CHECK_SECONDS


class AdmissionRequest(_Model):
    """A run asking its pool's admission workflow for a place (the `request` signal). Asked
    again by the same holder: answered again, never counted twice. Anyone may send one: its
    owner and priority are held to the pool's bounds, and its limits are ignored (admission
    workflows begun before they took their worker's settings took the latest asker's)."""

    holder: str = Field(min_length=1)
    owner: str = ""
    priority: int = Field(default=3, ge=1, le=5)
    key: str | None = None
    # The asking worker's limits (read by admission workflows begun before they read their
    # own worker's, and still sent for them).
    max_runs: int | None = None
    max_runs_per_key: int | None = None
    check_seconds: float = DEFAULT_CHECK_SECONDS


def parse_admission(environ: Mapping[str, str]) -> AdmissionSettings:
    """The admission settings in `environ`; `BadSetting` (one line) for one not understood."""
    return AdmissionSettings(
        max_runs=_limit(environ, MAX_RUNS_ENV),
        max_runs_per_key=_limit(environ, MAX_RUNS_PER_KEY_ENV),
        check_seconds=_seconds(environ, CHECK_SECONDS_ENV),
        max_priority=_priority(environ, MAX_PRIORITY_ENV),
        urgent_owners=_owners(environ, URGENT_OWNERS_ENV) or [],
        owners=_owners(environ, OWNERS_ENV),
    )


def terms_for(
    spec: RunSpec, settings: AdmissionSettings, task_queue: str, key: str | None
) -> AdmissionTerms | None:
    """What `spec` must ask for before it makes anything (None: nothing, it starts at once)."""
    if not settings.limits(spec.provider):
        return None
    counted = traits(spec.provider).counted_per_key
    counted_key = key if counted and settings.max_runs_per_key else None
    return AdmissionTerms(
        workflow_id=admission_workflow_id(task_queue),
        task_queue=task_queue,
        max_runs=settings.max_runs,
        key=counted_key,
        max_runs_per_key=settings.max_runs_per_key if counted_key else None,
        check_seconds=settings.check_seconds,
    )


def request_for(terms: AdmissionTerms, holder: str, spec: RunSpec) -> AdmissionRequest:
    return AdmissionRequest(
        holder=holder,
        owner=spec.owner,
        priority=spec.priority,
        key=terms.key,
        max_runs=terms.max_runs,
        max_runs_per_key=terms.max_runs_per_key,
        check_seconds=terms.check_seconds,
    )


def key_fingerprint(api_key: str, api_url: str = "") -> str:
    """A name for a Runtime key that says nothing of it: its workers agree on it, history may
    hold it."""
    digest = hashlib.sha256(f"{api_url}\n{api_key}".encode()).hexdigest()
    return f"key-{digest[:16]}"


def _limit(environ: Mapping[str, str], name: str) -> int | None:
    text = environ.get(name, "").strip()
    if not text:
        return None
    if not text.isdigit():
        raise BadSetting(f"{name}={text!r}: a whole number of runs (0 or nothing: no limit)")
    value = int(text)
    return value or None


def _seconds(environ: Mapping[str, str], name: str) -> float:
    text = environ.get(name, "").strip()
    if not text:
        return DEFAULT_CHECK_SECONDS
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value <= 86400:
        raise BadSetting(f"{name}={text!r}: seconds, more than 0 and at most 86400")
    return value


def _priority(environ: Mapping[str, str], name: str) -> int:
    text = environ.get(name, "").strip()
    if not text:
        return 1
    if text not in ("1", "2", "3", "4", "5"):
        raise BadSetting(f"{name}={text!r}: the most urgent priority a spec may claim, 1 to 5")
    return int(text)


def _owners(environ: Mapping[str, str], name: str) -> list[str] | None:
    """Comma-separated owners (None: the setting is unset)."""
    if name not in environ or not environ[name].strip():
        return None
    owners = [part.strip() for part in environ[name].split(",") if part.strip()]
    bad = [owner for owner in owners if len(owner) > 64 or not owner.isprintable()]
    if bad or any(not owner.isascii() for owner in owners):
        raise BadSetting(f"{name}: owners are printable ASCII, at most 64 characters each")
    return owners
