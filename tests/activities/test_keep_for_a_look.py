"""The pause activity at a run's end: the sandbox of a failed attempt is paused and labelled
with when `overnight reap` may delete it; a stopped or missing one is left as it is."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from temporalio.testing import ActivityEnvironment

from activities.models import SandboxRef
from activities.providers.local.engine import LocalEngine
from activities.providers.local.provider import LocalProvider
from activities.sandbox.activities import SandboxActivities
from overnight.core.constants import LABEL_KEEP_UNTIL, LABEL_RUN
from overnight.core.retention import label_value
from tests.live import granted

UNTIL = datetime(2026, 12, 4, 3, 15, 42, tzinfo=UTC)


@pytest.fixture
def engine(tmp_path: Path) -> LocalEngine:
    return LocalEngine(tmp_path / "home")


@pytest.fixture
async def acts(engine: LocalEngine) -> AsyncIterator[SandboxActivities]:
    async with SandboxActivities(
        providers={"local": LocalProvider(engine)}, grants=granted(allow_unisolated=True)
    ) as activities:
        yield activities


async def test_a_failed_attempts_sandbox_is_paused_and_labelled_with_when_it_may_go(
    acts: SandboxActivities, engine: LocalEngine
) -> None:
    engine.get_or_create("kept-1", labels={LABEL_RUN: "kept"}, isolation="none")
    ref = SandboxRef(provider="local", sandbox_id="kept-1", keep_until=UNTIL)

    settled = await ActivityEnvironment().run(acts.lifecycle.pause_sandbox, ref)

    assert settled.state == "paused"
    assert settled.labels == {LABEL_RUN: "kept", LABEL_KEEP_UNTIL: "20261204T031542Z"}
    assert engine.get("kept-1").labels[LABEL_KEEP_UNTIL] == "20261204T031542Z"
    # Retried (the same end): the same answer.
    again = await ActivityEnvironment().run(acts.lifecycle.pause_sandbox, ref)
    assert again.labels == settled.labels


async def test_a_stopped_or_missing_sandbox_is_not_labelled(
    acts: SandboxActivities, engine: LocalEngine
) -> None:
    engine.get_or_create("gone-1", labels={LABEL_RUN: "gone"}, isolation="none")
    engine.stop("gone-1")
    env = ActivityEnvironment()
    stopped = SandboxRef(provider="local", sandbox_id="gone-1", keep_until=UNTIL)
    assert (await env.run(acts.lifecycle.pause_sandbox, stopped)).state == "stopped"
    assert LABEL_KEEP_UNTIL not in engine.get("gone-1").labels
    missing = stopped.model_copy(update={"sandbox_id": "never-1"})
    assert (await env.run(acts.lifecycle.pause_sandbox, missing)).state == "missing"


async def test_on_runtime_the_kept_sandbox_gets_runtimes_own_retention_too(
    tmp_path: Path,
) -> None:
    """Runtime deletes a paused sandbox itself after its `:retention` days: set so it never
    goes before its label says, even if no `overnight reap` ever runs."""
    import withruntime

    from activities.providers.runtime.provider import RuntimeProvider
    from fakes.runtime import FakeRuntime
    from overnight.core.retention import provider_days

    home = tmp_path / "runtime-home"
    with pytest.MonkeyPatch.context() as env:
        async with FakeRuntime.local(home) as fake:
            fake.use(env, tmp_path / "runtime-config")
            provider = RuntimeProvider(timeout_seconds=10, max_retries=2, call_budget_seconds=60)
            async with SandboxActivities(
                providers={"runtime": provider}, grants=granted(allow_unisolated=True)
            ) as acts:
                rt = withruntime.AsyncRuntime(timeout=10, max_retries=1, wait_for_capacity=0)
                made = await rt.sandboxes.create(
                    name="kept-1", labels={LABEL_RUN: "kept"}, timeout_seconds=600
                )
                await rt.close()
                until = datetime.now(UTC) + timedelta(days=3)
                ref = SandboxRef(provider="runtime", sandbox_id=made.id, keep_until=until)
                settled = await ActivityEnvironment().run(acts.lifecycle.pause_sandbox, ref)

                assert settled.state == "paused"
                assert settled.labels[LABEL_KEEP_UNTIL] == label_value(until)
                # Counted from its creation (moments before `until` was taken): 3 days and a
                # moment, so 4 whole days: never less than the label's.
                assert fake.retention_days(made.id) == 4
                assert provider_days(until, settled.created_at, datetime.now(UTC)) == 4
                assert fake.counts_by_route(made.id).get("retention") == 1
