"""Everything an `AgentRun` knows, in one model, so continue-as-new can carry it whole.

The run's own fields are here; the rest is grouped by concern, one model per group
(`state_groups`: the sandbox, attempts, money, progress, waits for a person, the pool;
`state_features`: the features a run may use). A state is read in either shape it was ever
carried in, and written in the one its run began with (`state_shape`, STATE_GROUPED_PATCH).

Pure data: no temporalio imports, no I/O. The workflow mutates it; `decide` reads it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from overnight.core.models import Budget, RunSpec, RunState
from overnight.core.retry_note import RetryNote
from workflows.pure import state_shape
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


class SupervisorState(BaseModel):
    model_config = ConfigDict(extra="forbid")

    spec: RunSpec
    state: RunState = "starting"
    budget: Budget
    started_at: datetime

    # The current sandbox and agent process (None between sandboxes); the rest of what the
    # run knows of its sandbox is in `sandbox`.
    attempt: int = 0
    sandbox_id: str | None = None
    process_id: str | None = None

    cancel_requested: bool = False
    cancel_reason: str | None = None

    # Notifications (see workflows.notify_steps). False for runs begun before them, so their
    # recorded histories replay unchanged; the count numbers each state change told of.
    notifying: bool = False
    notifications_sent: int = 0

    # Which search attributes the namespace has (None until checked).
    search_attributes: list[str] | None = None

    # What no retry fixes fails the run at once (workflows.pure.hopeless). False for runs begun
    # before, so their histories replay unchanged; `failure`: the one line it failed with.
    fail_fast: bool = False
    failure: str | None = None
    # The create's last failed try, as its activity told (overnight/core/retry_note.py), while it
    # waits for the next; runs begun with `fail_fast` only. None once the create ends.
    waiting_on: RetryNote | None = None

    sandbox: SandboxState = Field(default_factory=SandboxState)
    attempts: AttemptsState = Field(default_factory=AttemptsState)
    money: MoneyState = Field(default_factory=MoneyState)
    progress: ProgressState = Field(default_factory=ProgressState)
    attention: AttentionState = Field(default_factory=AttentionState)
    # Admission (workflows/admission_steps.py).
    pool: PoolState = Field(default_factory=PoolState)
    kit: KitState = Field(default_factory=KitState)
    snapshot: SnapshotState = Field(default_factory=SnapshotState)
    net: NetState = Field(default_factory=NetState)
    hosts: HostsState = Field(default_factory=HostsState)
    done: DoneState = Field(default_factory=DoneState)
    workspace: WorkspaceState = Field(default_factory=WorkspaceState)
    delivery: DeliveryState = Field(default_factory=DeliveryState)
    ci: CiState = Field(default_factory=CiState)

    # The shape this state is carried in (continue-as-new): grouped for runs begun with
    # STATE_GROUPED_PATCH, flat for runs begun before, so a worker of the code before it
    # still reads what they hand on. Written only in the grouped shape.
    grouped: bool = False

    @model_validator(mode="before")
    @classmethod
    def _read_flat(cls, data: Any) -> Any:
        """A flat state (carried by a run begun before the grouping, or given field by field)
        is read into its groups."""
        return state_shape.grouped(data) if isinstance(data, dict) else data

    @model_serializer(mode="wrap")
    def _write_shape(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        return data if self.grouped else state_shape.flat(data)
