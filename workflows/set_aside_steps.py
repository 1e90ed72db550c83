"""AgentRun setting its current sandbox aside: its checkpoint (and the agent's last words)
salvaged, the sandbox paused and kept for a look; before a restart, or as the run comes to
need a person (`enter_attention`).

Workflow code (activities through `calls` and the steps it names).
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows import host_steps, kit_request_steps, money_steps, workspace_steps
    from workflows.calls import checkpoints
    from workflows.look_steps import Looks
    from workflows.messages import RunMessages
    from workflows.notify_steps import Notifier
    from workflows.pure import safety_net
    from workflows.pure.decide import NeedsAttention
    from workflows.pure.notifications import attention_text
    from workflows.pure.run_record import note_last_words, take_requests_file
    from workflows.pure.state import SupervisorState


async def salvage_checkpoint(s: SupervisorState, looks: Looks, why: str, ended: str) -> None:
    if s.sandbox_id is None:
        return
    # A sandbox may have paused at its lease end since the run last looked (its worker
    # died, the read was retried late): salvaging wakes it, whatever the last look said.
    wake = s.sandbox.lease_keeping
    read = await checkpoints.read_checkpoint(
        s.spec,
        s.sandbox_id,
        s.progress.seen_digest,
        why,
        wake_paused=wake,
        output_of=s.process_id,
        requests_path=checkpoints.requests_path_of(s),
        known_requests_digest=s.kit.requests_digest,
        route=host_steps.current_route(s),
    )
    looks.take_checkpoint(s, read)
    await workspace_steps.keep_if_changed(s)
    if read is not None:
        take_requests_file(s, read.requests)
        note_last_words(s, read.output_tail, ended, workflow.now())


async def set_aside(
    s: SupervisorState, looks: Looks, *, why: str, ended: str, salvaged: bool = False
) -> None:
    """Copy the checkpoint (and the agent's last words: `ended` says why it ended; not
    again when `salvaged` already) and pause the current sandbox, kept for a look."""
    if s.sandbox_id is None:
        return
    if not salvaged:
        await salvage_checkpoint(s, looks, why, ended)
    safety_net.noticed(s, workflow.now())
    await money_steps.end_sandbox(s, stop=False, why=why)
    s.sandbox.paused_sandboxes.append(s.sandbox_id)
    s.sandbox_id = None
    s.process_id = None
    s.sandbox.lease_ends_at = None
    s.sandbox.watch_token = None


async def enter_attention(
    s: SupervisorState,
    decision: NeedsAttention,
    messages: RunMessages,
    looks: Looks,
    notifier: Notifier,
    *,
    daily: bool = False,
    keep_sandbox: bool = False,
) -> None:
    """`daily`: held only by the key's daily spending limit (goes on by itself when its
    window reopens); `keep_sandbox`: the sandbox is already paused and will be woken."""
    s.attention.attention_reason = decision.reason
    s.attempts.pending_restart = decision.pending_restart
    s.attention.attention_since = workflow.now()
    s.attention.daily_window_wait = daily
    messages.budget_changed = False
    ended = decision.pending_restart or decision.reason
    if decision.in_place and s.sandbox_id is not None:
        await kit_request_steps.pause_in_place(s, decision.reason)
    elif not keep_sandbox:
        await set_aside(s, looks, why=f"needs attention: {decision.reason}", ended=ended)
    # Only once the sandbox is paused: `needs_attention` promises nothing runs.
    s.state = "needs_attention"
    workflow.logger.warning("run needs attention: %s", decision.reason)
    why = attention_text(decision.reason, decision.pending_restart)
    notifier.tell(s, "needs_attention", why)
