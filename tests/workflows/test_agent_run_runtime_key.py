"""A run's model key held by Runtime as an egress secret (overnight/core/runtime_model_key.py) is
erased at the run's end, in the step that frees what the run kept beside its sandboxes
(`free_run_store`), for a coding agent and for an agent of one's own naming `model_credential`
alike; a run whose key is not held so names none.
"""

from __future__ import annotations

from temporalio.client import Client

from fakes.activities import FakeWorld, exits
from overnight.core.runtime_model_key import secret_name
from tests.workflows.harness import make_spec, started_run


async def test_a_runtime_runs_model_key_is_erased_at_its_end(
    client: Client, world: FakeWorld
) -> None:
    world.script(1, [exits(0)])
    held = make_spec(provider="runtime", model_credential="TEAM_MODEL_KEY")
    async with started_run(client, world, held) as handle:
        assert (await handle.result()).outcome == "finished"
    world.script(1, [exits(0)])
    local = make_spec(model_credential="TEAM_MODEL_KEY")
    async with started_run(client, world, local) as handle:
        await handle.result()

    assert world.erased_secrets == [secret_name(held.run_id)]
    assert world.log.index(f"free store {held.run_id}") > world.log.index("stop box-1")
