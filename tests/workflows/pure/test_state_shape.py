"""The shapes a run's state is carried in (continue-as-new): the flat one every run carried
before the grouping is read into the groups and written back byte for byte; the grouped one
(runs begun with STATE_GROUPED_PATCH) goes round whole."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pydantic import ValidationError
from temporalio.api.common.v1 import Payload
from temporalio.contrib.pydantic import pydantic_data_converter

from tests.workflows.harness import make_spec
from workflows.pure.state import SupervisorState
from workflows.pure.state_groups import SandboxState
from workflows.pure.state_shape import FLAT_ORDER, GROUP_OF, GROUPS

# A run of the code before the grouping, carried on after continue-as-new: its input holds the
# state as its predecessor wrote it (flat). test_replay.py replays it.
CARRIED = Path(__file__).resolve().parents[2] / "histories" / "carried_flat_state.json"
T0 = datetime(2026, 12, 7, 12, tzinfo=UTC)
CONVERTER = pydantic_data_converter.payload_converter


def carried_payload() -> Payload:
    started = json.loads(CARRIED.read_text())["events"][0]
    payloads = started["workflowExecutionStartedEventAttributes"]["input"]["payloads"]
    return Payload(
        metadata={key: base64.b64decode(value) for key, value in payloads[1]["metadata"].items()},
        data=base64.b64decode(payloads[1]["data"]),
    )


def test_every_flat_field_has_one_place_and_every_place_a_flat_field() -> None:
    own = set(SupervisorState.model_fields) - set(GROUPS) - {"grouped"}
    assert own.isdisjoint(GROUP_OF)
    assert sorted(FLAT_ORDER) == sorted(own | set(GROUP_OF))
    assert len(FLAT_ORDER) == len(set(FLAT_ORDER))
    assert all(SupervisorState.model_fields[group].annotation is GROUPS[group] for group in GROUPS)


def test_a_flat_state_carried_before_the_grouping_is_read_into_its_groups() -> None:
    s = CONVERTER.from_payloads([carried_payload()], [SupervisorState])[0]
    assert isinstance(s, SupervisorState) and not s.grouped
    assert (s.attempt, s.sandbox_id, s.state) == (1, "box-1", "running")
    assert s.progress.checkpoint is not None and s.progress.checkpoint.startswith('{"next"')
    assert s.sandbox.lease_keeping and s.sandbox.sandbox_started_at is not None
    assert s.budget.max_restarts == 6  # the extension it carried


def test_a_run_begun_before_the_grouping_hands_on_the_same_bytes_it_was_handed() -> None:
    carried = carried_payload()
    s = CONVERTER.from_payloads([carried], [SupervisorState])[0]
    [written] = CONVERTER.to_payloads([s])
    assert written == carried
    assert list(s.model_dump()) == list(FLAT_ORDER)


def test_a_grouped_state_goes_round_whole() -> None:
    s = CONVERTER.from_payloads([carried_payload()], [SupervisorState])[0]
    s.grouped = True
    s.kit.answers["q1"] = "yes"
    [written] = CONVERTER.to_payloads([s])
    shape = json.loads(written.data)
    assert shape["grouped"] is True and shape["kit"]["answers"] == {"q1": "yes"}
    assert not set(shape) & set(GROUP_OF)  # nothing flat
    assert CONVERTER.from_payloads([written], [SupervisorState])[0] == s


def test_fields_given_flat_land_in_their_groups_beside_a_group_given_whole() -> None:
    spec = make_spec()
    s = SupervisorState.model_validate(
        {
            "spec": spec,
            "budget": spec.budget,
            "started_at": T0,
            "lease_ends_at": T0,
            "sandbox": SandboxState(lease_keeping=True),
            "checkpoint": "cp-1",
        }
    )
    assert s.sandbox.lease_keeping and s.sandbox.lease_ends_at == T0
    assert s.progress.checkpoint == "cp-1"


def test_a_field_given_both_flat_and_in_its_group_is_refused() -> None:
    spec = make_spec()
    with pytest.raises(ValidationError, match="lease_ends_at given both"):
        SupervisorState.model_validate(
            {
                "spec": spec,
                "budget": spec.budget,
                "started_at": T0,
                "lease_ends_at": T0,
                "sandbox": {"lease_ends_at": T0},
            }
        )
