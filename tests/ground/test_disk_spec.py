"""`disk_mib` is a spec's ask for its sandbox's disk: bounded where the spec is written, with
one line naming the field; left out, the worker's default (old specs stay valid)."""

from __future__ import annotations

from typing import Any

import pytest

from overnight.cli import client as api
from overnight.core.models import MAX_DISK_MIB, MIN_DISK_MIB, RunSpec

BASE: dict[str, Any] = {
    "run_id": "disk",
    "repo": "/tmp/nowhere.git",
    "agent_dir": "/tmp/agent",
    "command": "python3 /workspace/agent/main.py",
}


def test_a_spec_without_disk_mib_is_valid_and_leaves_it_to_the_worker() -> None:
    assert RunSpec.model_validate(BASE).disk_mib is None


@pytest.mark.parametrize("value", [MIN_DISK_MIB, 4096, MAX_DISK_MIB])
def test_a_disk_mib_within_its_bounds_is_taken(value: int) -> None:
    assert api.parse_spec({**BASE, "disk_mib": value}).disk_mib == value


@pytest.mark.parametrize("value", [0, -1, MIN_DISK_MIB - 1, MAX_DISK_MIB + 1, 10**30, "64", 6.5])
def test_a_disk_mib_out_of_bounds_or_not_a_number_is_refused_naming_the_field(value: Any) -> None:
    with pytest.raises(api.SpecError) as refused:
        api.parse_spec({**BASE, "disk_mib": value})
    message = str(refused.value)
    assert len(message.splitlines()) == 1
    assert message.startswith("spec: field disk_mib: "), message


def test_runtime_takes_a_disk_of_at_least_3072_mib_as_its_api_does() -> None:
    with pytest.raises(api.SpecError) as refused:
        api.parse_spec({**BASE, "provider": "runtime", "disk_mib": 3071})
    assert str(refused.value).startswith("spec: field disk_mib: ")
    assert "runtime" in str(refused.value)
    assert api.parse_spec({**BASE, "provider": "runtime", "disk_mib": 3072}).disk_mib == 3072
