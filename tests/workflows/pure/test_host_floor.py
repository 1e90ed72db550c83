"""A local sandbox paused because its host went below the worker's floor of free space makes
the run need attention in place: not the agent's doing and nothing lost, so no restart (a new
sandbox could not even be made below the floor). An extension wakes the same agent. Runs begun
before the marker take the pause as anyone else's."""

from __future__ import annotations

from activities.models import Observation
from overnight.core.constants import HOST_FLOOR_REASON
from tests.workflows.pure.test_decide import later, running
from workflows.pure.decide import NeedsAttention, Restart, WakeInPlace, decide, decide_resume

REASON = HOST_FLOOR_REASON.format(
    free=1450, home="/root/.overnight", floor=2048, setting="OVERNIGHT_MIN_FREE_MIB"
)


def _held() -> Observation:
    return Observation(process_state="running", sandbox_state="paused", pause_reason=REASON)


def test_a_sandbox_paused_below_its_hosts_floor_needs_attention_where_it_stands() -> None:
    state = running()
    state.sandbox.host_floor_kept = True
    assert decide(state, _held(), later(minutes=3)) == NeedsAttention(REASON, in_place=True)


def test_an_extension_wakes_the_same_agent() -> None:
    state = running()
    state.sandbox.host_floor_kept = True
    state.sandbox.paused_in_place = True
    assert decide_resume(state, later(minutes=5)) == WakeInPlace()


def test_a_run_begun_before_the_marker_takes_it_as_paused_from_outside() -> None:
    assert decide(running(), _held(), later(minutes=3)) == Restart(
        "sandbox was paused from outside"
    )
