"""Notifications on the real stack: a `python worker.py` process (SIGKILLed on purpose), the
dev server, a real agent, and a careful receiver on loopback (tests/webhook_receiver.py) that
checks signatures and timestamps and keeps every POST it gets."""

from __future__ import annotations

import asyncio
import os
import secrets
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError

from overnight.cli import client as api
from overnight.core.grants import SECRET_ENV_ENV, WRITABLE_BIND_ROOTS_ENV
from overnight.core.models import Budget, BudgetExtension
from overnight.worker.devserver import DevServer
from tests.chaos.stack import WorkerPool, worker_env
from tests.conftest import free_port
from tests.e2e.helpers import wait_for_status
from tests.live import new_run_id, nothing_left_running, scripted_spec
from tests.waits import CAP
from tests.webhook_receiver import Receiver
from workflows.notify_steps import notify_workflow_id

SIGNING = f"sign-{secrets.token_hex(8)}"
SECRET_NAME = "OVERNIGHT_NOTIFY_TEST_TOKEN"


async def until(check: Callable[[], bool], what: str, timeout: float = CAP) -> None:
    give_up = time.monotonic() + timeout
    while not check():
        if time.monotonic() > give_up:
            raise AssertionError(f"not in {timeout}s: {what}")
        await asyncio.sleep(0.2)


async def notify_workflow_started(client: Client, workflow_id: str) -> bool:
    try:
        await client.get_workflow_handle(workflow_id).describe()
    except RPCError:
        return False
    return True


@pytest.mark.timeout(240)
async def test_a_receiver_gets_one_signed_needs_attention_through_a_worker_kill_and_one_finish(
    dev_server: DevServer, dev_client: Client, tmp_path: Path
) -> None:
    secret = f"tok-{secrets.token_hex(12)}"
    home = tmp_path / "worker-home"
    receiver = Receiver(secret=SIGNING, port=free_port())  # down: nothing listens there yet
    env = worker_env(
        dict(os.environ),
        {
            "TEMPORAL_ADDRESS": dev_server.address,
            "TEMPORAL_NAMESPACE": dev_server.namespace,
            "OVERNIGHT_HOME": str(home),
            "OVERNIGHT_NOTIFY_SECRET": SIGNING,
            "OVERNIGHT_UI_URL": dev_server.ui_url,
            SECRET_NAME: secret,
            # What the worker lets specs ask for (overnight/core/grants.py).
            SECRET_ENV_ENV: SECRET_NAME,
            WRITABLE_BIND_ROOTS_ENV: str(tmp_path / "origins"),
        },
    )
    run_id = new_run_id("notify")
    pool = WorkerPool(1, env, f"notify-{run_id}", tmp_path)
    [worker] = pool.workers
    spec = scripted_spec(
        run_id,
        tmp_path / "origins",
        "loud-crash",
        secret_env=[SECRET_NAME],
        env={"AGENT_SECRET_NAME": SECRET_NAME},
        budget=Budget(max_restarts=0),
        notify=[receiver.url],
    )
    pool.start_all()
    try:
        async with nothing_left_running(dev_client, [home]) as runs:
            await pool.wait_ready()
            runs.append(run_id)
            await api.start_run(dev_client, spec, task_queue=pool.task_queue)
            await wait_for_status(
                dev_client, run_id, lambda s: s.state == "needs_attention", timeout=60
            )
            # The first try found the receiver down: its retry workflow holds the notification.
            retry_id = notify_workflow_id(run_id, 1)
            give_up = time.monotonic() + CAP
            while not await notify_workflow_started(dev_client, retry_id):
                assert time.monotonic() < give_up, "no retry workflow"
                await asyncio.sleep(0.2)

            # The only worker dies (SIGKILL) and another takes over: the run's history replays.
            pool.kill(worker)
            receiver.up()
            pool.start(worker)
            await pool.wait_ready()
            await until(lambda: receiver.events() == ["needs_attention"], "needs_attention")
            retried = dev_client.get_workflow_handle(retry_id)
            described = await retried.describe()
            give_up = time.monotonic() + CAP  # a time cap, not 100 looks: load slows it
            while time.monotonic() < give_up:
                if described.status == WorkflowExecutionStatus.COMPLETED:
                    break
                await asyncio.sleep(0.2)
                described = await retried.describe()
            assert described.status == WorkflowExecutionStatus.COMPLETED

            await api.extend_budget(dev_client, run_id, BudgetExtension(restarts=1))
            result = await asyncio.wait_for(api.wait_result(dev_client, run_id), timeout=90)
            await until(lambda: "finished" in receiver.events(), "finished")
            await asyncio.sleep(2)  # anything more would come now
    finally:
        await asyncio.to_thread(pool.stop_all)
        receiver.down()

    assert result.outcome == "finished"
    # Exactly one of each, each signed and fresh, none a repeat (restarts were not asked for).
    assert receiver.events() == ["needs_attention", "finished"]
    assert [(r.signed, r.fresh, r.repeat) for r in receiver.seen] == [(True, True, False)] * 2
    attention, finished = (r.json for r in receiver.accepted)
    assert attention["event_id"] == f"{run_id}-1" and finished["event_id"] == f"{run_id}-3"
    assert attention["state"] == "needs_attention"
    assert attention["reason"] == "agent crashed (exit 3); restart budget used up (0 of 0)"
    assert attention["budget_left"]["restarts"] == 0
    assert attention["web_ui"] == api.web_ui_url(dev_server.ui_url, dev_server.namespace, run_id)
    tail = attention["output_tail"]
    assert tail["attempt"] == 1
    assert tail["text"].endswith("RuntimeError: the API refused token ***")
    assert finished["state"] == "finished" and finished["attempt"] == 2
    assert finished["output_tail"]["text"].endswith("all done")
    for got in receiver.seen:
        assert secret.encode() not in got.body
