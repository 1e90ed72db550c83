"""Every error names the field and the fix (issue 51): no exception type name (`RPCError:`,
`ValueError:`) and no Rust log line reaches a user. The real CLI, as a subprocess, against the
session's dev server where the error is the server's."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from overnight.cli import client as api
from overnight.cli.error_text import one_line
from overnight.worker.devserver import DevServer
from tests.cli.test_cli import NOWHERE, OVERNIGHT, good_spec
from tests.live import in_process_worker, new_run_id

BIG = "x" * 3_000_000  # 2.9 MiB: past Temporal's 2 MB per payload
TOO_LARGE = (
    "spec too large: env.BIG is 2.9 MiB; a spec may be at most 256 KiB (Temporal's payload "
    "limits): put large data in a file in agent_dir or the repo, and name it in the spec"
)


def _overnight(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(OVERNIGHT), *args], capture_output=True, text=True, timeout=120)


async def test_a_spec_past_temporals_payload_limit_is_refused_before_anything_is_sent(
    dev_server: DevServer, dev_client: Client, tmp_path: Path
) -> None:
    run_id = new_run_id("too-large")
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(good_spec(run_id=run_id, env={"BIG": BIG, "SMALL": "1"})))
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(
        json.dumps(good_spec(run_id=f"{run_id}-a"))
        + "\n"
        + json.dumps(good_spec(run_id=f"{run_id}-b", env={"BIG": BIG}))
        + "\n"
    )
    where = ["--address", dev_server.address]
    one, many = await asyncio.gather(
        asyncio.to_thread(_overnight, *where, "start", str(spec)),
        asyncio.to_thread(_overnight, *where, "start", "--many", str(tasks)),
    )
    # No Rust WARN line on stdout, no RPCError: one line naming the field, the limit, the fix.
    assert (one.returncode, one.stdout, one.stderr) == (2, "", f"overnight: {TOO_LARGE}\n")
    assert (many.returncode, many.stdout) == (2, "")
    assert many.stderr == f"overnight: {tasks} line 2: {TOO_LARGE}\n"
    # Nothing was started, not even the good line before it.
    for never in (run_id, f"{run_id}-a", f"{run_id}-b"):
        with pytest.raises(RPCError) as missing:
            await dev_client.get_workflow_handle(never).describe()
        assert missing.value.status == RPCStatusCode.NOT_FOUND


async def test_the_python_api_refuses_a_spec_too_large_before_sending_it(
    dev_client: Client,
) -> None:
    spec = api.parse_spec(good_spec(run_id=new_run_id("api-large"), env={"BIG": BIG}))
    with pytest.raises(api.SpecError) as refused:
        await api.start_run(dev_client, spec)
    assert str(refused.value) == TOO_LARGE


def test_schedule_create_refuses_a_spec_too_large_before_connecting(tmp_path: Path) -> None:
    spec = tmp_path / "nightly.json"
    spec.write_text(json.dumps({**good_spec(env={"BIG": BIG}), "run_id": ""}))
    done = _overnight(*NOWHERE, "schedule", "create", "nightly", str(spec), "--every", "1d")
    assert (done.returncode, done.stderr) == (2, f"overnight: {TOO_LARGE}\n")


@pytest.mark.parametrize("since", ["yesterday", "7", "-1d", "0h"])
def test_report_since_a_form_it_does_not_take_names_the_forms_it_takes(since: str) -> None:
    done = _overnight(*NOWHERE, "report", f"--since={since}")
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert line.startswith(f"overnight: --since {since!r}: "), line
    assert "Error" not in line
    assert "give a number and m, h, d or w (e.g. 7d, 36h)" in line or "more than zero" in line


@pytest.mark.parametrize(
    ("error", "line"),
    [
        (
            RPCError("Namespace nope is not found.", RPCStatusCode.NOT_FOUND, b""),
            "the Temporal server says: Namespace nope is not found: check --namespace or "
            "TEMPORAL_NAMESPACE",
        ),
        (
            RPCError("Blob data size exceeds limit.", RPCStatusCode.INVALID_ARGUMENT, b""),
            "the Temporal server refused it: Blob data size exceeds limit (a payload may be at "
            "most 2 MB): send less, and put large data in a file",
        ),
        (
            RPCError("Request unauthorized.", RPCStatusCode.UNAUTHENTICATED, b""),
            "the Temporal server says: Request unauthorized: check TEMPORAL_API_KEY or the TLS "
            "settings of this shell",
        ),
        (
            WorkflowFailureError(
                cause=ApplicationError("out of budget: nobody extended it", type="OutOfBudget")
            ),
            "the run failed: out of budget: nobody extended it",
        ),
        (
            KeyError("surprise"),
            "unexpected error: 'surprise' (overnight --debug shows where; please report it)",
        ),
    ],
)
def test_an_error_is_one_line_without_its_type_name(error: Exception, line: Any) -> None:
    assert one_line(error) == line


async def test_status_with_no_worker_up_says_to_start_one(
    dev_server: DevServer, dev_client: Client
) -> None:
    # A run's status is a query a worker answers, an ended run's too: after `overnight demo
    # --keep-server` (its worker gone with the demo) `overnight status` waited 15 s for
    # "the Temporal server says: Timeout expired", or "no poller seen ... worker may be down".
    run_id = new_run_id("no-worker")
    async with in_process_worker(dev_client, "no-worker") as queue:
        await api.start_run(dev_client, api.parse_spec(good_spec(run_id=run_id)), task_queue=queue)
        with pytest.raises(WorkflowFailureError):  # /tmp/nowhere.git: refused at start
            await asyncio.wait_for(api.wait_result(dev_client, run_id), 120)
    said = await asyncio.to_thread(_overnight, "--address", dev_server.address, "status", run_id)
    assert (said.returncode, said.stdout) == (1, ""), said
    assert said.stderr.startswith(f"overnight: no worker answered for run {run_id} ("), said
    # Its queue is its own (as a demo's is): `overnight dev`, on `overnight`, would not answer.
    assert said.stderr.endswith(
        f"): a worker answers for every run, an ended one too: start one on its task queue "
        f"({queue}: `python worker.py --task-queue {queue}`)\n"
    ), said
