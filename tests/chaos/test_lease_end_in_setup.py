"""A sandbox whose lease ends while it is being set up is carried on with, not blamed on the
spec. Seen in a CI-form run on a loaded machine: a local run with a 4 s lease spent it on
the clone; the branch switch, given what was left of the lease, was cut off with no message,
and the run ended as `SpecUnusable: field branch: cannot switch to branch …:`."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from activities.providers.local.engine import LocalEngine
from activities.providers.local.provider import LocalProvider
from activities.providers.protocol import CommandOutput, ProviderError
from activities.sandbox_base.setup import (
    APP_DIR,
    branch_script,
    clone_and_switch,
    running_sandbox,
    spec_request,
)
from tests.live import new_run_id, scripted_spec

# How long the switch outlives the lease: the lease ends while it runs, never before.
SWITCH_SECONDS = 3.0
LEASE_LEFT_SECONDS = 1.0


class LeaseEndsInTheSwitch(LocalProvider):
    """The real local provider, on a machine slow enough that the branch switch meets the
    sandbox's lease end: the lease is moved to end during it, and the switch is slowed."""

    def __init__(self, engine: LocalEngine, branch: str) -> None:
        super().__init__(engine)
        self.switch = branch_script(branch)
        self.switches = 0

    async def run(self, sandbox_id: str, command: str, **kwargs: object) -> CommandOutput:
        if command == self.switch and self.switches == 0:
            self.switches += 1
            self.engine.set_lease_end(sandbox_id, time.time() + LEASE_LEFT_SECONDS)
            command = f"sleep {SWITCH_SECONDS}\n{command}"
        return await super().run(sandbox_id, command, **kwargs)  # type: ignore[arg-type]


async def test_a_lease_end_during_the_branch_switch_is_retried_in_the_woken_sandbox(
    tmp_path: Path,
) -> None:
    spec = scripted_spec(new_run_id("setup-lease"), tmp_path, "last-words")
    engine = LocalEngine(tmp_path / "home")
    provider = LeaseEndsInTheSwitch(engine, spec.branch)
    request = spec_request(
        spec, None, name=f"{spec.run_id}-1", labels={}, max_total_cost_micros=None
    )
    try:
        sandbox, created = await running_sandbox(provider, request)
        assert created
        with pytest.raises(ProviderError) as cut:
            await clone_and_switch(provider, sandbox.sandbox_id, spec)
        # Retryable, and it says what happened: no spec error with an empty message.
        assert cut.value.retryable, cut.value
        assert str(cut.value) == f"switching to branch {spec.branch} timed out"
        assert (await provider.sandbox(sandbox.sandbox_id)).state == "paused"

        # The create's retry: the same sandbox, woken with a fresh lease, and the switch done.
        again, created = await running_sandbox(provider, request)
        assert (again.sandbox_id, created, again.state) == (sandbox.sandbox_id, False, "running")
        await clone_and_switch(provider, sandbox.sandbox_id, spec)
        on = await provider.run(sandbox.sandbox_id, "git branch --show-current", cwd=APP_DIR)
        assert on.stdout.strip() == spec.branch
    finally:
        for meta in engine.list_sandboxes():
            engine.stop(meta.id)
