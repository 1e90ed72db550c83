"""AgentRun's money steps: a sandbox's end with its final charges, and the daily-limit wait.

Workflow code (activities through `calls`); what a read means is in `workflows.pure.money`.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows import host_steps
    from workflows.calls import daily_limit, sandbox_lifecycle
    from workflows.pure import budget, money
    from workflows.pure.decide import NeedsAttention
    from workflows.pure.state import SupervisorState


async def end_sandbox(s: SupervisorState, *, stop: bool, why: str) -> None:
    """Pause (or stop) the current sandbox, close its spend, and take what the provider
    charged for it in place of the estimate (read after the pause, so it is final)."""
    assert s.sandbox_id is not None
    settled = await sandbox_lifecycle.pause_or_stop(
        s.spec,
        s.sandbox_id,
        stop=stop,
        why=why,
        read_charge=money.keeps_account(s),
        route=host_steps.current_route(s),
    )
    now = workflow.now()
    budget.close_sandbox_spend(s, now)
    if settled is not None and settled.charge is not None:
        if settled.charge.sandbox_id == s.sandbox_id:
            money.take_charge(s, settled.charge, now)


def daily_attention(s: SupervisorState, refusal: str, pending: str | None) -> NeedsAttention:
    """The wait for the key's daily spending window, with what was refused. `pending`: the
    restart that was due (None: the sandbox kept paused is woken instead)."""
    hours = s.spec.attention_hours
    every = int(money.DAILY_WINDOW_RECHECK.total_seconds() // 60)
    reason = (
        f"daily spending limit: {refusal}; goes on by itself once the key's 24-hour window "
        f"has room (looked at every {every} min, for up to {hours:g} h), or extend_budget"
    )
    if pending is None and s.sandbox_id is None:
        pending = "daily spending window reopened"
    return NeedsAttention(reason, pending_restart=pending)


async def daily_window_open(s: SupervisorState) -> bool:
    """Read the key's daily limit again: True once it covers the next lease."""
    read = await daily_limit.read_daily_limit(s.spec)
    if read is None or not read.keeps_account:
        return read is not None  # a provider with no account has no daily limit to wait for
    if read.daily is None:
        return False
    now = workflow.now()
    money.take_daily(s, read.daily, now)
    s.money.money_read_at = now
    return money.daily_room(s, read.daily)
