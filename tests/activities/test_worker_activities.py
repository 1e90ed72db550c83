"""The composition root (activities/worker_activities.py): the list the worker registers
holds every activity the workflows call, each once, under its recorded name, on the
providers and grants of the one `SandboxActivities` it holds."""

from __future__ import annotations

from temporalio.activity import _Definition  # the name `activity.defn` gave (as Worker reads it)

from activities.models import ActivityName
from activities.worker_activities import WorkerActivities
from overnight.core.grants import Grants

# Registered beside the list, by the worker itself (overnight/worker/reap_schedule.py).
REGISTERED_BY_THE_WORKER = {ActivityName.REAP_SANDBOXES}


async def test_every_activity_name_is_registered_once() -> None:
    async with WorkerActivities(providers={}, grants=Grants()) as activities:
        names = [_Definition.must_from_callable(f).name for f in activities.all()]
    assert len(names) == len(set(names))
    declared = {
        value
        for key, value in vars(ActivityName).items()
        if not key.startswith("_") and isinstance(value, str)
    }
    assert set(names) == declared - REGISTERED_BY_THE_WORKER


async def test_the_sandbox_activities_are_registered_with_their_grants() -> None:
    grants = Grants(allow_unisolated=True)
    async with WorkerActivities(providers={}, grants=grants) as activities:
        registered = activities.all()
        sandbox = activities.sandbox
        assert all(f in registered for f in [*sandbox.own(), *sandbox.lifecycle.all()])
        assert activities.grants is sandbox.grants is grants
