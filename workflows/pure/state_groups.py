"""The parts of `SupervisorState` that hold a run's sandbox, its attempts, its money, its
progress, its waits for a person and its place in its pool, one model each (the features a
run may use are in `state_features`).

Pure data: no temporalio imports, no I/O. Field names are those of the flat state carried
before the grouping (workflows/pure/state_shape.py reads and writes that shape).
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from activities.models import GatewayBooks
from overnight.core.admission import AdmissionTerms
from overnight.core.agent_requests import ModelUsage
from overnight.core.checkpoint_text import CheckpointFacts
from overnight.core.models import DailyLimit, LastWords, RestartRecord


class ChargeFigure(BaseModel):
    """What the provider charged one sandbox (settled + held), as last read, beside the
    estimate of that sandbox's cost up to the same moment: the budget swaps one for the other
    and keeps estimating only the time since."""

    model_config = ConfigDict(extra="forbid")

    micros: int
    estimated_usd: float
    read_at: datetime


class SandboxState(BaseModel):
    """The current sandbox beyond its id (`SupervisorState.sandbox_id`): its lease, its pauses,
    its provider's watch (workflows.pure.lease, workflows/lease_steps.py)."""

    model_config = ConfigDict(extra="forbid")

    sandbox_started_at: datetime | None = None
    # Sandboxes of this run that may still be paused (kept for a look), oldest first.
    paused_sandboxes: list[str] = Field(default_factory=list)
    # How the current sandbox is isolated, as its provider said (None: the provider's own).
    isolation: str | None = None
    # Leases (see workflows.pure.lease). False for runs begun before leases were kept, so their
    # recorded histories replay unchanged.
    lease_keeping: bool = False
    # A paused sandbox's lease has ended when either its provider's end or `lease_ends_at` has
    # come (workflows.pure.lease.lease_ended); before, the provider's end alone. Runs begun with
    # LEASE_END_EITHER_PATCH.
    lease_end_either: bool = False
    # A local sandbox paused below its host's floor of free space needs attention in place
    # (decide); runs begun with HOST_FLOOR_PATCH.
    host_floor_kept: bool = False
    lease_ends_at: datetime | None = None
    # When the current lease was last extended (or granted): progress after it earns the next.
    lease_extended_at: datetime | None = None
    # Times a sandbox paused at its lease end was woken to carry on (no restart).
    lease_resumes: int = 0
    # Times an agent its sandbox's pause ended (no cgroup to freeze) was started again in the
    # same sandbox after the wake (workflows.same_sandbox_steps; no restart).
    pause_resumes: int = 0
    # The current sandbox was last seen paused: salvaging its checkpoint must wake it.
    sandbox_paused: bool = False
    # Where the provider's watch of the current sandbox stands (opaque; None: start a new one).
    watch_token: str | None = None
    # The sandbox was paused where it stands (the spend budget ran out): the same agent is
    # woken on extension, with nothing redone.
    paused_in_place: bool = False
    # Connections its sandboxes' network refused, per sandbox, per host asked for
    # (workflows/pure/egress.py).
    egress_refused: dict[str, dict[str, int]] = Field(default_factory=dict)


class AttemptsState(BaseModel):
    """The run's restarts and fresh-context starts, and how its last agent ended
    (workflows.pure.decide, workflows.pure.run_record)."""

    model_config = ConfigDict(extra="forbid")

    restarts_used: int = 0
    fresh_starts_used: int = 0
    restarts: list[RestartRecord] = Field(default_factory=list)
    # A restart that was due when the budget ran out; done once the budget is extended.
    pending_restart: str | None = None
    # That restart was counted when it was decided (its new sandbox's create then failed), so
    # the extension does it without counting it again (runs begun with `fail_fast`).
    pending_counted: bool = False
    # The current agent process's fresh-context start (0: the attempt's first agent).
    process_fresh_start: int = 0
    # The last words of the agent that ended most recently (redacted in the worker).
    last_words: LastWords | None = None
    # A coding agent's run takes the adapter's exit code 76 as a loop (workflows.pure.decide).
    loop_exit: bool = False


class MoneyState(BaseModel):
    """What the run's sandboxes and model calls cost so far (workflows.pure.budget,
    workflows.pure.money, workflows.pure.model_books)."""

    model_config = ConfigDict(extra="forbid")

    # Sandboxes that have ended contribute their whole lifetime here.
    closed_spend_usd: float = 0
    # The part of that which is the current sandbox's (its leases before a wake), so its
    # provider's figure can replace its whole estimate.
    sandbox_spent_before_usd: float = 0
    # The provider's figures by sandbox id (Runtime; none on the local provider), when they
    # were last read, and the key's daily spending limit as last read.
    charges: dict[str, ChargeFigure] = Field(default_factory=dict)
    money_read_at: datetime | None = None
    daily_limit: DailyLimit | None = None
    # Model spend the agent reported, by stream (cumulative within each), and what no longer
    # fits in that map.
    model_usage: dict[str, ModelUsage] = Field(default_factory=dict)
    model_usd_folded: float = 0
    # Model calls through the worker's gateway (workflows/pure/model_books.py): whether the
    # run's are (False for runs begun before, so their histories replay unchanged), what each
    # host's gateway booked (by host queue, "" for a run's one worker), and the spend budget
    # the gateway's cap was last set from.
    gateway_metered: bool = False
    gateway_books: dict[str, GatewayBooks] = Field(default_factory=dict)
    model_cap_budget: float | None = None
    # The request body (its hash) whose repeats the run last restarted its agent for.
    gateway_loop_acted: str | None = None


class ProgressState(BaseModel):
    """The last good checkpoint and the clocks it starts (workflows.pure.run_record,
    workflows.pure.stall_watch)."""

    model_config = ConfigDict(extra="forbid")

    # When the stall clock last started: a checkpoint taken, and also a new sandbox, a fresh
    # start, a wake (the stall restart comes `spec.stall_seconds` after it).
    last_progress_at: datetime | None = None
    # When the agent last wrote a checkpoint the run took: its progress, as a person is told
    # it (runs begun with `progress_is_checkpoints`; before, the stall clock's start was).
    last_checkpoint_at: datetime | None = None
    progress_is_checkpoints: bool = False
    # The last good checkpoint: workflow history is its off-machine copy.
    checkpoint: str | None = None
    checkpoint_digest: str | None = None
    checkpoint_is_json: bool = False
    # What the kept checkpoint says (its summary, a snapshot request), as read with it. None
    # for runs from before it was kept: the text is then read (never raising) when needed.
    checkpoint_facts: CheckpointFacts | None = None
    # Digest of the last version seen, good or not, so a rejected file is not re-sent.
    seen_digest: str | None = None
    checkpoint_rejected: str | None = None


class AttentionState(BaseModel):
    """The run's waits for a person (workflows/attention_steps.py)."""

    model_config = ConfigDict(extra="forbid")

    # Time spent waiting for a person does not count against max_hours.
    attention_seconds: float = 0
    attention_since: datetime | None = None
    attention_reason: str | None = None
    # The current wait for a person is for the key's daily spending window to reopen: the
    # run looks again now and then and goes on by itself (a person may still extend or cancel).
    daily_window_wait: bool = False


class PoolState(BaseModel):
    """The run's place in its pool (workflows/admission_steps.py)."""

    model_config = ConfigDict(extra="forbid")

    # What the run asked its pool for (None: nothing, or given back), and whether the pool
    # has let it in.
    admission: AdmissionTerms | None = None
    admitted: bool = False
    # The run gave its place back for a long wait (`admission_steps.step_out`) and asks again
    # before its sandbox wakes; meanwhile it is in no pool (the admission workflow asks).
    stepped_out: bool = False
