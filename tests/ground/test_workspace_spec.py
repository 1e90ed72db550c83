"""The kept workspace's names, bounds, rewind refusals and the rule `reap` applies to its refs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from overnight.core.models import RunSpec
from overnight.core.retention import RunEnd, ref_verdict
from overnight.core.workspace_spec import (
    MAX_WORKSPACE_MIB,
    KeptWorkspace,
    WorkspaceView,
    check_ref_name,
    owner_of_ref,
    ref_name,
    rewind_refusal,
    run_of_ref,
    workspace_line,
)

NOW = datetime(2026, 12, 2, tzinfo=UTC)


def kept(number: int, outcome: str = "pushed", detail: str = "") -> KeptWorkspace:
    pushed = outcome == "pushed"
    return KeptWorkspace(
        number=number,
        outcome=outcome,  # type: ignore[arg-type]
        at=NOW,
        ref=ref_name("r", number) if pushed else None,
        commit=f"{number:040x}" if pushed else None,
        detail=detail,
    )


def test_refs_are_named_by_run_and_number_and_read_back() -> None:
    assert ref_name("run-1", 3) == "refs/overnight/run-1/3"
    assert run_of_ref("refs/overnight/run-1/3") == ("run-1", 3)
    for other in ["refs/heads/main", "refs/overnight/run-1/x", "refs/overnight/a/b/1"]:
        assert run_of_ref(other) is None


def test_a_done_checks_refs_belong_to_its_run_for_reap() -> None:
    assert check_ref_name("run-1", 2) == "refs/overnight/run-1/check-2"
    assert owner_of_ref("refs/overnight/run-1/check-2") == "run-1"
    assert owner_of_ref("refs/overnight/run-1/3") == "run-1"
    for other in ["refs/overnight/run-1/check-", "refs/overnight/run-1/checkx-1", "refs/heads/x"]:
        assert owner_of_ref(other) is None


def test_keep_workspace_is_off_by_default_and_its_limit_bounded() -> None:
    spec = RunSpec(repo="/r", agent_dir="/a", command="c")
    assert not spec.keep_workspace and spec.max_workspace_mib == 100
    for bad in (0, MAX_WORKSPACE_MIB + 1):
        with pytest.raises(ValidationError, match="max_workspace_mib"):
            RunSpec(repo="/r", agent_dir="/a", command="c", max_workspace_mib=bad)


@pytest.mark.parametrize(
    ("keeping", "state", "number", "pending", "why"),
    [
        (False, "running", 1, False, "does not keep its workspace"),
        (True, "needs_attention", 1, False, "the run is needs_attention"),
        (True, "running", 1, True, "already under way"),
        (True, "running", 7, False, "no checkpoint 7 (kept: 1..3)"),
        (True, "running", 2, False, "checkpoint 2's workspace was not kept (too big)"),
    ],
)
def test_a_rewind_is_refused_with_a_reason(
    keeping: bool, state: str, number: int, pending: bool, why: str
) -> None:
    records = [kept(1), kept(2, "over_limit", "too big"), kept(3)]
    refusal = rewind_refusal(keeping, state, records, number, pending)
    assert refusal is not None and why in refusal
    assert rewind_refusal(True, "running", records, 3, False) is None


def test_the_line_names_the_latest_kept_and_the_last_problem() -> None:
    view = WorkspaceView(kept=[kept(1), kept(2, "over_limit")], problem="checkpoint 2: big")
    assert workspace_line(view) == "kept at checkpoint 1 (`refs/overnight/r/1`) · checkpoint 2: big"
    assert workspace_line(WorkspaceView()) == "kept at each checkpoint (none yet)"
    assert workspace_line(None) is None


def test_refs_go_with_the_runs_retention() -> None:
    closed = RunEnd(clean=True, closed_at=NOW - timedelta(days=2))
    assert not ref_verdict(RunEnd(open=True), 3, now=NOW).delete
    assert not ref_verdict(closed, 3, now=NOW).delete
    assert ref_verdict(closed, 1, now=NOW).delete
    assert ref_verdict(closed, 3, now=NOW, include_paused=True).delete
    assert ref_verdict(RunEnd(known=False), None, now=NOW).delete
    assert not ref_verdict(closed, None, now=NOW).delete  # its retention not known: kept
