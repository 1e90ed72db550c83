"""Recorded histories of the `OvernightAdmission` workflow still replay on today's code (a
change that would not is a non-determinism error for every pool in flight). Re-record with
`OVERNIGHT_RECORD_HISTORIES=1 .venv/bin/pytest tests/admission/test_admission_live.py -k
continues_as_new`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from tests.admission.test_admission_live import ADMISSION_HISTORIES
from workflows.admission_run import OvernightAdmission

RECORDED = sorted(ADMISSION_HISTORIES.glob("*.json"))


def test_an_admission_history_is_checked_in() -> None:
    assert RECORDED, f"expected recorded admission histories in {ADMISSION_HISTORIES}"


@pytest.mark.parametrize("path", RECORDED, ids=[path.stem for path in RECORDED])
async def test_recorded_admission_history_replays(path: Path) -> None:
    text = path.read_text()
    workflow_id = "overnight-admission-recorded"
    events = json.loads(text)["events"]
    assert events[0]["eventType"] == "EVENT_TYPE_WORKFLOW_EXECUTION_STARTED"
    history = WorkflowHistory.from_json(workflow_id, text)
    replayer = Replayer(workflows=[OvernightAdmission], data_converter=pydantic_data_converter)
    await replayer.replay_workflow(history)
