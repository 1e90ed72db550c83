"""Each provider's limits are enforced where the user writes the spec, with one line naming the
field: Runtime's API refuses leases outside 60..3600 s, more than 16 vCPUs and memory outside
128..65536 MiB, so a runtime spec asking for them never starts; the local provider takes
few-second leases (its tests and demos use them)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from overnight.cli import client as api
from overnight.cli.main import main as cli_main

BASE: dict[str, Any] = {
    "run_id": "limits",
    "repo": "/tmp/nowhere.git",
    "agent_dir": "/tmp/agent",
    "command": "python3 /workspace/agent/main.py",
}


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("sandbox_timeout_seconds", 59),
        ("sandbox_timeout_seconds", 3601),
        ("sandbox_timeout_seconds", 8),
        ("vcpu", 17),
        ("memory_mib", 127),
        ("memory_mib", 65537),
    ],
)
def test_a_runtime_spec_outside_the_apis_limits_is_refused_naming_the_field(
    field: str, value: int
) -> None:
    with pytest.raises(api.SpecError) as refused:
        api.parse_spec({**BASE, "provider": "runtime", field: value})
    message = str(refused.value)
    assert len(message.splitlines()) == 1
    assert message.startswith(f"spec: field {field}: "), message
    assert "runtime" in message


@pytest.mark.parametrize(
    ("field", "value"),
    [("sandbox_timeout_seconds", 60), ("sandbox_timeout_seconds", 3600), ("vcpu", 16)],
)
def test_a_runtime_spec_at_the_apis_limits_is_accepted(field: str, value: int) -> None:
    spec = api.parse_spec({**BASE, "provider": "runtime", field: value})
    assert getattr(spec, field) == value


def test_the_local_provider_takes_a_few_second_lease() -> None:
    spec = api.parse_spec({**BASE, "sandbox_timeout_seconds": 3, "vcpu": 32})
    assert (spec.sandbox_timeout_seconds, spec.vcpu) == (3, 32)


def test_overnight_start_refuses_a_runtime_lease_too_short_before_connecting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({**BASE, "provider": "runtime", "sandbox_timeout_seconds": 30}))
    code = cli_main(["--address", "127.0.0.1:9", "start", str(spec)])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert "sandbox_timeout_seconds" in err and len(err.splitlines()) == 1


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("memory_mib", 10**30),
        ("memory_mib", 1024 * 1024 + 1),
        ("vcpu", 65),
        ("max_checkpoint_bytes", 1024 * 1024 + 1),
        ("sandbox_timeout_seconds", 1e300),
        ("poll_seconds", 86401),
        ("stall_seconds", 7 * 24 * 3600 + 1),
        ("attention_hours", 90 * 24 + 1),
        ("max_fresh_starts", 10**9),
        ("budget", {"max_restarts": 10**9}),
        ("budget", {"max_spend_usd": 1e12}),
        ("budget", {"max_hours": 1e9}),
    ],
)
def test_a_size_or_count_beyond_its_bound_is_refused_with_one_line_naming_the_field(
    field: str, value: Any
) -> None:
    with pytest.raises(api.SpecError) as refused:
        api.parse_spec({**BASE, field: value})
    message = str(refused.value)
    assert len(message.splitlines()) == 1
    assert message.startswith(f"spec: field {field}: "), message


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("memory_mib", 1024 * 1024),
        ("max_checkpoint_bytes", 1024 * 1024),
        ("poll_seconds", 86400),
        ("stall_seconds", 6 * 3600),
        ("attention_hours", 90 * 24),
        ("max_fresh_starts", 10_000),
        ("budget", {"max_restarts": 10_000, "max_spend_usd": 1_000_000}),
    ],
)
def test_a_size_or_count_at_its_bound_is_accepted(field: str, value: Any) -> None:
    spec = api.parse_spec({**BASE, field: value})
    assert getattr(spec, field) is not None


def test_overnight_start_refuses_memory_mib_of_ten_to_the_thirty_before_connecting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({**BASE, "memory_mib": 10**30}))
    code = cli_main(["--address", "127.0.0.1:9", "start", str(spec)])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert "memory_mib" in err and len(err.splitlines()) == 1
