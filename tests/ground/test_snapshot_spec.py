"""RunSpec's snapshot recovery fields: defaults, and the one-line refusal per provider."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from overnight.core.models import RunSpec

BASE = {"repo": "/r", "agent_dir": "/a", "command": "c"}


def test_checkpoint_recovery_is_the_default_and_leaves_the_mode_unset() -> None:
    spec = RunSpec.model_validate(BASE)
    assert spec.recovery == "checkpoint" and spec.snapshot_mode is None


def test_snapshot_recovery_takes_each_providers_first_mode() -> None:
    local = RunSpec.model_validate({**BASE, "recovery": "snapshot"})
    assert local.snapshot_mode == "disk"
    runtime = RunSpec.model_validate({**BASE, "recovery": "snapshot", "provider": "runtime"})
    assert runtime.snapshot_mode == "memory"
    disk = {**BASE, "recovery": "snapshot", "provider": "runtime", "snapshot_mode": "disk"}
    assert RunSpec.model_validate(disk).snapshot_mode == "disk"


def test_memory_snapshots_on_the_local_provider_are_a_one_line_spec_error() -> None:
    with pytest.raises(ValidationError) as err:
        RunSpec.model_validate({**BASE, "recovery": "snapshot", "snapshot_mode": "memory"})
    lines = [e["msg"] for e in err.value.errors()]
    assert lines == [
        "Value error, snapshot_mode: provider 'local' offers disk snapshots only (got 'memory')"
    ]


@pytest.mark.parametrize(
    "bad",
    [
        {"recovery": "snapshots"},
        {"snapshot_mode": "ram"},
        {"snapshot_every_seconds": 0},
        {"snapshot_retention_days": 0},
        {"snapshot_on_checkpoint": "yes"},
    ],
)
def test_bad_snapshot_fields_are_refused(bad: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        RunSpec.model_validate({**BASE, **bad})
