"""The worker decides what a spec may ask for (overnight/core/grants.py), on the real dev server
with a real worker: each thing a spec may not ask for without a grant fails the run at once, as
`SpecRefused`, with one line naming the field and how to allow it, before any sandbox exists; what
the worker grants runs."""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError
from temporalio.exceptions import ApplicationError

from activities.providers.local.provider import LocalProvider
from overnight.cli import client as api
from overnight.core.constants import LABEL_RUN
from overnight.core.grants import SPEC_REFUSED, Grants
from overnight.core.home import overnight_home
from overnight.core.models import RunSpec
from tests.conftest import scratch_root
from tests.live import granted, in_process_worker, new_run_id, scripted_spec
from tests.waits import CAP
from tests.webhook_receiver import Receiver

ALLOWED_SECRET = "GRANTS_E2E_TOKEN"  # allowed by the pattern GRANTS_E2E_*


@pytest.fixture(scope="module")
def roots(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A folder the worker allows read-only binds from, and one it allows writable binds from
    (where the runs' origins are)."""
    return tmp_path_factory.mktemp("read-only-root"), tmp_path_factory.mktemp("writable-root")


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def strict_queue(dev_client: Client, roots: tuple[Path, Path]) -> AsyncIterator[str]:
    """A worker granting a pattern of secrets and two bind roots, and nothing else."""
    read_only, writable = roots
    grants = Grants(
        secret_env=("GRANTS_E2E_*",),
        bind_roots=(str(read_only),),
        writable_bind_roots=(str(writable),),
    )
    async with in_process_worker(dev_client, "strict", grants=grants) as queue:
        yield queue


def _refusals(read_only: Path, writable: Path) -> dict[str, tuple[dict[str, Any], str]]:
    """Spec changes the strict worker refuses, and the field each refusal names."""
    home = overnight_home()
    return {
        "isolation-none": ({"isolation": "none"}, "isolation"),
        "secret-not-allowed": ({"secret_env": ["RUNTIME_API_KEY"]}, "secret_env"),
        "bind-outside-the-roots": ({"binds": [{"path": str(scratch_root() / "else")}]}, "binds"),
        "writable-bind-without-the-grant": (
            {"binds": [{"path": str(read_only), "writable": True}]},
            "binds",
        ),
        "bind-inside-overnight-home": ({"binds": [{"path": str(home / "temporal")}]}, "binds"),
        "bind-holding-overnight-home": ({"binds": [{"path": str(home.parent)}]}, "binds"),
        "repo-inside-overnight-home": ({"repo": str(home / "sandboxes" / "x")}, "repo"),
        "agent-dir-inside-overnight-home": ({"agent_dir": str(home / "sandboxes")}, "agent_dir"),
        "webhook-secret-not-allowed": (
            {"notify": [{"url": "http://127.0.0.1:9/h", "secret_env": "TEMPORAL_API_KEY"}]},
            "notify.0.secret_env",
        ),
    }


REFUSALS = [
    "isolation-none",
    "secret-not-allowed",
    "bind-outside-the-roots",
    "writable-bind-without-the-grant",
    "bind-inside-overnight-home",
    "bind-holding-overnight-home",
    "repo-inside-overnight-home",
    "agent-dir-inside-overnight-home",
    "webhook-secret-not-allowed",
]


def _spec(run_id: str, writable: Path, **changes: Any) -> RunSpec:
    """The scripted agent proving its secret, its origin under the writable root."""
    env = {"AGENT_SECRET_NAME": ALLOWED_SECRET, "AGENT_HOLD": "0.5"}
    return scripted_spec(run_id, writable, "secret-proof", env=env, **changes)


@pytest.mark.parametrize("case", REFUSALS)
async def test_a_spec_asking_for_what_the_worker_does_not_grant_fails_at_once_with_no_sandbox(
    dev_client: Client, strict_queue: str, roots: tuple[Path, Path], case: str
) -> None:
    read_only, writable = roots
    changes, field = _refusals(read_only, writable)[case]
    run_id = new_run_id("refused")
    began = time.monotonic()
    await api.start_run(dev_client, _spec(run_id, writable, **changes), task_queue=strict_queue)
    handle = dev_client.get_workflow_handle(run_id)
    with pytest.raises(WorkflowFailureError) as failed:
        await asyncio.wait_for(handle.result(), timeout=CAP)

    assert time.monotonic() - began < 10
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError)
    assert (cause.type, cause.non_retryable) == (SPEC_REFUSED, True)
    assert len(cause.message.splitlines()) == 1
    assert cause.message.startswith(f"spec: field {field}: "), cause.message
    assert "to allow it" in cause.message or "which no sandbox may see" in cause.message
    assert (await handle.describe()).status == WorkflowExecutionStatus.FAILED
    # Nothing was made, nor even asked for.
    assert await LocalProvider().list({LABEL_RUN: run_id}, include_stopped=True) == []
    history = await handle.fetch_history()
    assert not any(
        e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED for e in history.events
    )


async def test_what_the_worker_grants_runs(
    dev_client: Client,
    strict_queue: str,
    roots: tuple[Path, Path],
    runs: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    read_only, writable = roots
    secret = "granted-value-42"
    monkeypatch.setenv(ALLOWED_SECRET, secret)  # the in-process worker's environment
    monkeypatch.setenv("GRANTS_E2E_SIGNING", "hook-signing")
    (read_only / "data").mkdir(exist_ok=True)
    run_id = new_run_id("granted")
    runs.append(run_id)
    with Receiver(secret="hook-signing") as receiver:
        spec = _spec(
            run_id,
            writable,
            secret_env=[ALLOWED_SECRET],
            binds=[
                {"path": str(writable / run_id / "origin.git"), "writable": True},
                {"path": str(read_only / "data")},
            ],
            notify=[{"url": receiver.url, "secret_env": "GRANTS_E2E_SIGNING"}],
        )
        await api.start_run(dev_client, spec, task_queue=strict_queue)
        result = await asyncio.wait_for(api.wait_result(dev_client, run_id), timeout=60)

    assert result.outcome == "finished"
    assert hashlib.sha256(secret.encode()).hexdigest() in (result.checkpoint or "")
    [finished] = receiver.accepted
    assert finished.signed and finished.json["event"] == "finished"


async def test_isolation_none_runs_on_a_worker_that_grants_it(
    dev_client: Client, tmp_path: Path, runs: list[str]
) -> None:
    run_id = new_run_id("unisolated")
    runs.append(run_id)
    async with in_process_worker(dev_client, "lax", granted(allow_unisolated=True)) as queue:
        spec = scripted_spec(run_id, tmp_path, "last-words", isolation="none")
        await api.start_run(dev_client, spec, task_queue=queue)
        result = await asyncio.wait_for(api.wait_result(dev_client, run_id), timeout=60)
    assert result.outcome == "finished"
