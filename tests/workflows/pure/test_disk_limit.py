"""A sandbox paused past its disk limit makes the run need attention, not restart: a new
sandbox from the same checkpoint would fill the same way, one restart after another. The
sandbox is kept paused for a look; an extension restarts from the checkpoint."""

from __future__ import annotations

from activities.models import Observation
from tests.workflows.pure.test_decide import later, running
from workflows.pure.decide import NeedsAttention, Restart, decide, decide_resume

REASON = "disk limit of 64 MiB reached (more than 1,024 MiB used)"


def test_a_sandbox_paused_past_its_disk_limit_needs_attention_with_the_reason() -> None:
    seen = Observation(process_state="running", sandbox_state="paused", pause_reason=REASON)
    decision = decide(running(), seen, later(minutes=3))
    assert decision == NeedsAttention(REASON, pending_restart=REASON)


def test_an_agent_that_died_in_a_sandbox_paused_for_its_disk_needs_attention_too() -> None:
    seen = Observation(
        process_state="exited", exit_code=1, sandbox_state="paused", pause_reason=REASON
    )
    assert decide(running(), seen, later(minutes=3)) == NeedsAttention(REASON, REASON)


def test_an_extension_after_a_full_disk_restarts_from_the_checkpoint() -> None:
    state = running()
    state.attempts.pending_restart = REASON
    assert decide_resume(state, later(minutes=5)) == Restart(REASON)


def test_other_pauses_are_as_before() -> None:
    for reason in (None, "requested"):
        seen = Observation(process_state="running", sandbox_state="paused", pause_reason=reason)
        assert decide(running(), seen, later(minutes=3)) == Restart(
            "sandbox was paused from outside"
        )
