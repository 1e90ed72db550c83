"""The building blocks of overnight's contracts: the budget, its extension, the rates, the
states a run goes through, and the bounds every input is held to. `overnight.core.models` builds
the run's spec, status and result on them (and re-exports them).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from overnight.core.provider_traits import Provider as Provider

RUN_ID_PATTERN = r"^[a-z0-9][a-z0-9-]{0,62}$"
RUN_ID_PATTERN_OR_EMPTY = r"^([a-z0-9][a-z0-9-]{0,62})?$"
ENV_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"
# Variables overnight sets for the agent itself; a spec may not shadow them.
RESERVED_ENV = frozenset(
    {
        "OVERNIGHT_RUN_ID",
        "OVERNIGHT_ATTEMPT",
        "OVERNIGHT_RESTART_REASON",
        "OVERNIGHT_CHECKPOINT",
        "OVERNIGHT_FRESH_CONTEXT_EXIT_CODE",
        "OVERNIGHT_DONE_CHECK_FILE",
        "OVERNIGHT_MODEL_URL",
        "OVERNIGHT_MODEL_TOKEN",
    }
)

# Upper bounds keep every deadline computable (a `timedelta` of 1e300 s overflows in the workflow).
MAX_SECONDS = 366 * 24 * 3600
MAX_HOURS = 366 * 24
PositiveSeconds = Annotated[float, Field(gt=0, le=MAX_SECONDS)]
PositiveHours = Annotated[float, Field(gt=0, le=MAX_HOURS)]
# How long a run's failed attempts' sandboxes are kept after it ends (overnight.core.retention).
MAX_KEEP_FAILED_DAYS = 365
KeepDays = Annotated[int, Field(ge=0, le=MAX_KEEP_FAILED_DAYS)]
MAX_SPEND_EXTENSION_USD = 1_000_000
# Upper bounds on a spec's sizes and counts, so a mistyped or hostile spec is refused where
# it is written, not by the 16th create (a prlimit of 10**30 bytes) or by the history.
MAX_MEMORY_MIB = 1024 * 1024  # 1 TiB
# A sandbox's disk (`disk_mib`): room for a clone and the agent kit at least, 1 TiB at most.
MIN_DISK_MIB = 64
MAX_DISK_MIB = 1024 * 1024
# The checkpoint travels in activity results and the run's state: well under Temporal's
# 2 MB per payload (it warns from 512 KB), with room for its JSON escaping.
MAX_CHECKPOINT_BYTES = 1024 * 1024
MAX_POLL_SECONDS = 24 * 3600
MAX_STALL_SECONDS = 7 * 24 * 3600
MAX_ATTENTION_HOURS = 90 * 24
MAX_FRESH_STARTS = 10_000
MAX_RESTARTS = 10_000
RunState = Literal[
    "queued",
    "starting",
    "running",
    "restarting",
    "waiting_for_answer",
    "needs_attention",
    "finishing",
    "finished",
    "cancelled",
    "failed",
]
# Admission (overnight/core/admission.py): the order queued runs are let in, 1 first ... 5, and who
# a run is for (a team or person, fairness across them); printable ASCII, at most 64 bytes as
# Temporal's task-queue fairness keys are.
Priority = Annotated[int, Field(ge=1, le=5)]
Owner = Annotated[str, Field(pattern=r"^[ -~]{0,64}$")]
# A run's labels (`RunSpec.labels`): what the console and the Web UI filter runs by
# (the `OvernightLabels` search attribute), so plain words of letters, digits and `._:/-`.
MAX_RUN_LABELS = 10
Label = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._:/-]{0,39}$")]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _StrictInput(_Strict):
    """What people write: no type coercion (`true` is not 1, `"5"` is not 5) and finite numbers."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


class Budget(_StrictInput):
    """How much a run may use before a person has to look at it."""

    max_restarts: int = Field(default=5, ge=0)
    # No upper bound here: extensions add up. A spec's own budget is bounded by RunSpec.
    max_hours: float = Field(default=24, gt=0)
    max_spend_usd: float | None = Field(default=None, gt=0)
    # Time paused for the agent's questions and `wait_until`s (its own budget: neither counts
    # as run hours). 12 h: a night of a model's 5-hour usage windows waits at most the night.
    max_wait_hours: float = Field(default=12, gt=0)
    # Failed rounds of the done check (`RunSpec.done_when`): each failed round starts the agent
    # again with the failure; the round that uses the last one makes the run need a person.
    max_done_checks: int = Field(default=3, ge=0)
    # CI rounds (`pull_request.until_checks_pass`): how many times the agent is started again
    # with a failing check of its pull request; a failure past them makes the run need a person.
    max_ci_rounds: int = Field(default=3, ge=0)


class BudgetExtension(_StrictInput):
    """What a person adds to a run's budget with the `extend_budget` signal or update."""

    restarts: int = Field(default=0, ge=0)
    hours: float = Field(default=0, ge=0, le=MAX_HOURS)
    spend_usd: float = Field(default=0, ge=0, le=MAX_SPEND_EXTENSION_USD)
    wait_hours: float = Field(default=0, ge=0, le=MAX_HOURS)
    done_checks: int = Field(default=0, ge=0, le=MAX_RESTARTS)
    ci_rounds: int = Field(default=0, ge=0, le=MAX_RESTARTS)

    def is_empty(self) -> bool:
        return (
            self.restarts == 0
            and self.hours == 0
            and self.spend_usd == 0
            and self.wait_hours == 0
            and self.done_checks == 0
            and self.ci_rounds == 0
        )


class Rates(_StrictInput):
    """Prices used for the spend estimate (sandbox lifetime x size)."""

    vcpu_hour_usd: float = Field(default=0.025, ge=0)
    gib_hour_usd: float = Field(default=0.0075, ge=0)
    # Snapshot storage, per GiB kept per hour (recovery "snapshot").
    snapshot_gib_hour_usd: float = Field(default=0.0001, ge=0)
