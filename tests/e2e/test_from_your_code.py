"""docs/from-your-code.md: the calls of examples/from_your_code/run.py, which the page shows as
it is, against the real stack: a plain `temporalio` client starts a run from a
`RunSpec` without a run id, queries it, extends its budget and awaits its `RunResult`; the
`cancel` signal completes the run as `cancelled`, Temporal's cancellation ends it as Canceled;
`OvernightState` says `cancelled` for both."""

from __future__ import annotations

import asyncio
import importlib.util
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import pytest_asyncio
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError
from temporalio.common import SearchAttributeKey
from temporalio.exceptions import CancelledError

from overnight.cli import client as api
from overnight.core.constants import TASK_QUEUE
from overnight.core.models import RunSpec
from overnight.demo.outside_world import ledger_url
from overnight.demo.sample_demo import demo_spec, ledger_entries, make_origin
from overnight.worker.runner import serve
from tests.e2e.helpers import wait_for_status
from tests.live import granted
from tests.waits import CAP

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "from_your_code" / "run.py"
STATE = SearchAttributeKey.for_keyword("OvernightState")


def _example() -> ModuleType:
    found = importlib.util.spec_from_file_location("from_your_code", EXAMPLE)
    assert found is not None and found.loader is not None
    module = importlib.util.module_from_spec(found)
    found.loader.exec_module(module)
    return module


run_example = _example()


def spec_without_run_id(root: Path, **env: str) -> tuple[RunSpec, Path]:
    """The demo's spec (the sample agent crashing once after its pull request), run id left
    out; and the run's ledger."""
    files = make_origin(root)
    spec = demo_spec("unused", files, ledger=ledger_url(files.ledger))
    raw: dict[str, Any] = spec.model_dump(mode="json", exclude={"run_id", "branch"})
    raw["env"].update(env)
    return RunSpec.model_validate(raw), files.ledger


@pytest_asyncio.fixture(loop_scope="session")
async def overnight_queue_worker(dev_client: Client) -> AsyncIterator[None]:
    """A worker on the default task queue `overnight`, the one the docs' code names."""
    ready, stop = asyncio.Event(), asyncio.Event()
    worker = asyncio.create_task(
        serve(dev_client, task_queue=TASK_QUEUE, ready=ready, stop=stop, grants=granted())
    )
    waiter = asyncio.create_task(ready.wait())
    await asyncio.wait({worker, waiter}, timeout=CAP, return_when=asyncio.FIRST_COMPLETED)
    waiter.cancel()
    if worker.done():
        worker.result()
    assert ready.is_set(), "the worker did not start polling"
    try:
        yield
    finally:
        stop.set()
        await asyncio.wait_for(worker, timeout=60)


def test_the_docs_show_the_client_example_as_it_is() -> None:
    page = ROOT / "docs" / "from-your-code.md"
    assert f"```python\n{EXAMPLE.read_text()}```" in page.read_text()


async def test_a_plain_client_starts_queries_extends_and_awaits_a_run(
    dev_client: Client,
    overnight_queue_worker: None,
    tmp_path: Path,
    runs: list[str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    workflow_id = f"fix-issue-{uuid.uuid4().hex[:6]}"
    spec, ledger = spec_without_run_id(tmp_path)
    runs.append(workflow_id)

    result = await asyncio.wait_for(
        run_example.supervise(dev_client, spec, workflow_id), timeout=60
    )

    assert (result.run_id, result.outcome, result.attempts) == (workflow_id, "finished", 2)
    assert capsys.readouterr().out.startswith(f"{workflow_id}: ")
    status = await api.get_status(dev_client, workflow_id)
    assert (status.budget.max_restarts, status.budget.max_hours) == (
        spec.budget.max_restarts + 2,
        spec.budget.max_hours + 4,
    )
    assert len(ledger_entries(ledger)) == 2


@pytest.mark.parametrize("graceful", [True, False], ids=["cancel-signal", "temporal-cancel"])
async def test_the_cancel_signal_completes_cancelled_and_temporals_cancel_ends_canceled(
    dev_client: Client, task_queue: str, tmp_path: Path, runs: list[str], graceful: bool
) -> None:
    workflow_id = f"stop-{uuid.uuid4().hex[:6]}"
    spec, _ = spec_without_run_id(tmp_path, AGENT_STEP_DELAY="30")
    runs.append(workflow_id)
    handle = await dev_client.start_workflow(
        "AgentRun", spec, id=workflow_id, task_queue=task_queue
    )
    await wait_for_status(dev_client, workflow_id, lambda s: s.state == "running")

    await run_example.stop(dev_client, workflow_id, graceful=graceful)

    if graceful:
        result = await asyncio.wait_for(api.wait_result(dev_client, workflow_id), timeout=CAP)
        assert result.outcome == "cancelled"
    else:
        with pytest.raises(WorkflowFailureError) as ended:
            await asyncio.wait_for(handle.result(), timeout=CAP)
        assert isinstance(ended.value.cause, CancelledError)
    described = await handle.describe()
    expected = WorkflowExecutionStatus.COMPLETED if graceful else WorkflowExecutionStatus.CANCELED
    assert described.status == expected
    assert described.typed_search_attributes.get(STATE) == "cancelled"
