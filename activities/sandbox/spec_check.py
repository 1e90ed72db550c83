"""What a worker answers at a run's start (`SandboxActivities.check_spec`, a local activity):
what in the spec it will not or cannot do, and what the run must ask its pool for before it
makes anything (admission). A result, not an error, so the run fails once, as `SpecRefused`.
"""

from __future__ import annotations

import asyncio

from temporalio import activity

from activities.admission.grants import spec_refusals, unset_secrets
from activities.admission.loopback_owners import OwnServices
from activities.coding_agent import setup as coding
from activities.coding_agent.base_url_check import base_url_problems
from activities.models import SpecCheck
from activities.sandbox.repo_check import repo_refusals
from overnight.core.admission import AdmissionSettings, admission_refusals, terms_for
from overnight.core.grants import Grants
from overnight.core.host_settings import host_lost_seconds
from overnight.core.models import RunSpec


async def check_spec(
    spec: RunSpec,
    grants: Grants,
    own_ports: OwnServices,
    admission: AdmissionSettings,
    key: str | None,
    holds_work: bool,
) -> SpecCheck:
    """The worker's answer to `spec`: `grants`, what specs may ask for here; `own_ports`, the
    worker's own services no sandbox may reach; `key`, its Runtime key's fingerprint;
    `holds_work`, whether the spec's provider makes real agents (a clone to check)."""
    # What its grants do not allow.
    found = await asyncio.to_thread(spec_refusals, spec, grants, None, own_ports)
    # And what it cannot give a coding agent (its CLI not installed here, ...).
    found += await asyncio.to_thread(coding.refusals, spec)
    # What only the start looks at: a credential unset here, a model API nothing answers
    # at (later, a create names the first, and the adapter backs off from the second).
    found += unset_secrets(spec, grants)
    if holds_work:
        # A local repo that is none: its clone would fail at every create (a provider of
        # virtual agents clones nothing).
        found += await asyncio.to_thread(repo_refusals, spec)
    if not found:
        # Tried from the worker only for a spec it would run: never a host port refused
        # above (activities/coding_agent/base_url_check.py says what else it never tries).
        found += await asyncio.to_thread(base_url_problems, spec)
    queue = activity.info().task_queue if activity.in_activity() else None
    terms = queue and terms_for(spec, admission, queue, key)
    found += admission_refusals(spec, admission)
    # Only a pinned spec's answer says it: a run begun before never meets the field.
    lost_after = host_lost_seconds() if spec.hosts else None
    return SpecCheck(
        refusals=found,
        admission=terms or None,
        host_lost_seconds=lost_after,
        holds_work=holds_work,
    )
