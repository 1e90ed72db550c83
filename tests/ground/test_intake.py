"""The run id taken from a workflow id: always a valid sandbox name and label, the id itself
when that is valid already, and different for different workflow ids."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from overnight.core.intake import derive_run_id

RUN_ID = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
workflow_ids = st.text(min_size=1, max_size=300)


@given(workflow_ids)
def test_a_derived_run_id_is_always_a_valid_sandbox_name(workflow_id: str) -> None:
    assert RUN_ID.match(derive_run_id(workflow_id))


@given(st.from_regex(RUN_ID, fullmatch=True))
def test_a_valid_workflow_id_is_its_own_run_id(workflow_id: str) -> None:
    assert derive_run_id(workflow_id) == workflow_id


@given(workflow_ids, workflow_ids)
def test_different_workflow_ids_get_different_run_ids(first: str, second: str) -> None:
    if first != second:
        assert derive_run_id(first) != derive_run_id(second)


def test_a_scheduled_firing_keeps_its_schedule_name_readable() -> None:
    run_id = derive_run_id("nightly-fix-2026-11-30T01:00:00Z")
    assert run_id.startswith("nightly-fix-2026-11-30t01-00-00z-")
