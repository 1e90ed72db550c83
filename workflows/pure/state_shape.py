"""The shapes a `SupervisorState` is carried in (continue-as-new's input, workflows/agent_run.py).

Grouped by concern (`state_groups`, `state_features`) for runs begun with STATE_GROUPED_PATCH;
flat, one key per field, as every run carried it before and runs begun before that marker
still do: a worker of the code before it reads only that shape. Both shapes are read.

Pure: no temporalio imports, no I/O.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from workflows.pure.state_features import (
    CiState,
    DeliveryState,
    DoneState,
    HostsState,
    KitState,
    NetState,
    SnapshotState,
    WorkspaceState,
)
from workflows.pure.state_groups import (
    AttemptsState,
    AttentionState,
    MoneyState,
    PoolState,
    ProgressState,
    SandboxState,
)

# Each group's field of `SupervisorState`, and its model.
GROUPS: dict[str, type[BaseModel]] = {
    "sandbox": SandboxState,
    "attempts": AttemptsState,
    "money": MoneyState,
    "progress": ProgressState,
    "attention": AttentionState,
    "pool": PoolState,
    "kit": KitState,
    "snapshot": SnapshotState,
    "net": NetState,
    "hosts": HostsState,
    "done": DoneState,
    "workspace": WorkspaceState,
    "delivery": DeliveryState,
    "ci": CiState,
}
# The group that holds each key of the flat shape (a key not here stays at the top).
GROUP_OF: dict[str, str] = {
    name: group for group, model in GROUPS.items() for name in model.model_fields
}
# The flat shape's keys, in the order it always had them.
FLAT_ORDER: tuple[str, ...] = tuple(
    """
    spec state budget started_at attempt sandbox_id process_id sandbox_started_at
    paused_sandboxes isolation lease_keeping lease_end_either host_floor_kept lease_ends_at
    lease_extended_at lease_resumes pause_resumes sandbox_paused watch_token restarts_used
    fresh_starts_used restarts attention_seconds attention_since attention_reason
    pending_restart pending_counted closed_spend_usd sandbox_spent_before_usd charges
    money_read_at daily_limit daily_window_wait last_progress_at last_checkpoint_at
    progress_is_checkpoints checkpoint checkpoint_digest checkpoint_is_json checkpoint_facts
    seen_digest checkpoint_rejected cancel_requested cancel_reason process_fresh_start
    last_words notifying notifications_sent snapshots snapshot_tries snapshot_last_try_at
    snapshot_request_done snapshot_checkpoint_digest snapshots_taken snapshot_failures
    snapshot_error snapshot_pause_seconds closed_snapshot_spend_usd restored_from admission
    admitted stepped_out search_attributes agent_requests question answer_given answers wait
    waiting_until request_handled wait_handled talk_marks_apart waiting_since waited_seconds
    wait_budget_kept paused_in_place model_usage egress_refused model_usd_folded
    gateway_metered gateway_books model_cap_budget gateway_loop_acted outputs request_refused
    requests_file file_requests requests_digest loop_exit safety_net_kept net_noticed_at
    net_lost_seconds net_attention_seconds_at_notice net_totals host_routing sandbox_hosts
    host_lost_seconds lost_hosts host_unseen_since fail_fast failure waiting_on
    done_checks_used done_rounds done_results done_pending check_sandboxes_made
    check_sandbox_id done_commit workspace_keeping workspace_count workspace_kept
    workspace_base workspace_digest workspace_problem workspace_memo rewind_to rewinding
    rewinds finish_pushes push_at pushed_commit pull_request_url delivery_waits
    pull_request_commit ci_watching ci_view ci_rounds_used ci_told ci_failed ci_waiting_since
    ci_waited_seconds keep_waits
    """.split()
)


def grouped(data: dict[str, Any]) -> dict[str, Any]:
    """`data` with each flat key moved into its group (`data` itself when it has none). A
    group given whole as well keeps what it holds; a field given both ways is refused."""
    if not any(key in GROUP_OF for key in data):
        return data
    moved: dict[str, Any] = {key: value for key, value in data.items() if key not in GROUP_OF}
    taken: dict[str, dict[str, Any]] = {}
    for key, value in data.items():
        group = GROUP_OF.get(key)
        if group is None:
            continue
        if group not in taken:
            given = moved.get(group)
            if given is not None and not isinstance(given, dict | BaseModel):
                raise ValueError(f"{group} is neither a mapping nor a model")
            taken[group] = moved[group] = _set_fields(given)
        if key in taken[group]:
            raise ValueError(f"{key} given both on its own and in {group}")
        taken[group][key] = value
    return moved


def flat(data: dict[str, Any]) -> dict[str, Any]:
    """`data`, a grouped dump, in the flat shape: each field at the top, in the flat order (a
    key the dump left out stays out; the shape's own mark, `grouped`, has no place there)."""
    out: dict[str, Any] = {}
    for key in FLAT_ORDER:
        group = GROUP_OF.get(key)
        holder = data if group is None else data.get(group, {})
        if key in holder:
            out[key] = holder[key]
    return out


def _set_fields(given: dict[str, Any] | BaseModel | None) -> dict[str, Any]:
    """A group given whole, as a mapping of what it sets (a model's defaults left out)."""
    if isinstance(given, BaseModel):
        return {name: getattr(given, name) for name in given.model_fields_set}
    return dict(given or {})
