"""Histories recorded from the workflow tests still replay on today's AgentRun.

A failure here means a change to AgentRun would break runs already in flight (a
non-determinism error). If the change is deliberate and no old runs matter, re-record:
`OVERNIGHT_RECORD_HISTORIES=1 .venv/bin/pytest tests/workflow` (see harness.py).
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from tests.workflows.harness import HISTORIES, RECORD_ENV
from workflows.agent_run import AgentRun

RECORDED = sorted(HISTORIES.glob("*.json"))


@pytest.mark.skipif(os.environ.get(RECORD_ENV) == "1", reason="re-recording the histories")
def test_histories_are_checked_in() -> None:
    assert len(RECORDED) >= 10, f"expected recorded histories in {HISTORIES}"


@pytest.mark.parametrize("path", RECORDED, ids=[path.stem for path in RECORDED])
async def test_recorded_history_replays(path: Path) -> None:
    text = path.read_text()
    history = WorkflowHistory.from_json(_workflow_id(text), text)
    replayer = Replayer(workflows=[AgentRun], data_converter=pydantic_data_converter)
    await replayer.replay_workflow(history)


def _workflow_id(text: str) -> str:
    """The recorded run's workflow id: the workflow tests start each run with id = run_id."""
    started = json.loads(text)["events"][0]["workflowExecutionStartedEventAttributes"]
    spec = json.loads(base64.b64decode(started["input"]["payloads"][0]["data"]))
    return str(spec["run_id"])
