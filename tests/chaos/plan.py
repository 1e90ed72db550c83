"""What a chaos run does: its size, the faults each agent carries, and the specs. Pure logic.

Every agent fault is one of the sample agent's own switches (they fire once per run) or a
sandbox time limit short enough to hit; the infrastructure faults (worker kills, a dev server
restart, a Runtime API storm) are scheduled by the harness from the `ChaosSize`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from overnight.demo import AGENT_DIR
from overnight.models import Budget, RunSpec
from overnight.outside_world import ledger_url
from tests.git_http import origin_fields

AgentFault = Literal["crash", "stall", "fresh_context", "time_limit"]
AGENT_FAULTS: tuple[AgentFault, ...] = ("crash", "stall", "fresh_context", "time_limit")
STEPS = 5
COMMAND = "python3 /workspace/agent/main.py --resume /workspace/checkpoint.json"

ROOMY_LIMIT_SECONDS = 1800.0

# Fault sets handed out in turn, so even a small run meets every kind. A stall never meets a
# time limit: the limit would end the stalled sandbox before the stall is noticed.
FAULT_SETS: tuple[tuple[AgentFault, ...], ...] = (
    ("crash",),
    ("stall",),
    ("fresh_context",),
    ("time_limit",),
    ("crash", "fresh_context"),
    ("stall", "crash"),
    ("time_limit", "fresh_context"),
    ("crash", "time_limit"),
    ("stall", "fresh_context"),
    (),
)


@dataclass(frozen=True)
class ChaosSize:
    """How hard to shake the stack. Times are seconds from the first run's start."""

    runs: int
    worker_kill_every: float = 20.0
    max_worker_kills: int | None = None  # None: keep killing until every run has ended
    storm_at: float = 25.0
    storm_seconds: float = 60.0
    server_restart_at: float | None = None
    server_down_seconds: float = 5.0
    deadline_seconds: float = 1200.0
    seed: int = 7
    # How long each agent step takes, and what counts as a stall: well above a step on a
    # loaded 2-core machine, short enough that a stalled agent is noticed during the chaos.
    step_delay: float = 1.0
    stall_seconds: float = 15.0
    # A time-limited sandbox fits about two of its (slower) steps; setup counts against it.
    time_limit_seconds: float = 9.0
    time_limit_step_delay: float = 2.5
    # Providers whose runs may carry a sandbox time limit.
    time_limit_providers: tuple[str, ...] = ("local", "runtime")


# Runs last minutes (steps of 20 s), so every shake meets runs in every phase.
FULL = ChaosSize(
    runs=20,
    storm_at=30.0,
    server_restart_at=100.0,
    deadline_seconds=1500.0,
    step_delay=20.0,
    stall_seconds=60.0,
    time_limit_seconds=50.0,
    time_limit_step_delay=20.0,
)
REDUCED = ChaosSize(
    runs=5,
    worker_kill_every=8.0,  # both kills land while runs are still going
    max_worker_kills=2,
    storm_at=8.0,
    storm_seconds=20.0,
    deadline_seconds=150.0,
    # Runtime sandboxes that hit their time limit can lose their last checkpoint (a known bug,
    # see tests/chaos/test_time_limit_checkpoint.py); the suite keeps time limits local until
    # it is fixed. The full size keeps both, so its table shows the bug.
    time_limit_providers=("local",),
)


@dataclass(frozen=True)
class RunPlan:
    run_id: str
    provider: Literal["local", "runtime"]
    faults: tuple[AgentFault, ...]
    # Step numbers the agent switches fire at (1..5).
    switches: dict[str, int] = field(default_factory=dict)

    def has(self, fault: AgentFault) -> bool:
        return fault in self.faults


def plan_runs(size: ChaosSize, prefix: str) -> list[RunPlan]:
    """One plan per run: providers alternate, fault sets go round, step numbers are random."""
    rng = random.Random(size.seed)
    plans = []
    owed_runtime = 0  # runs moved to local for their time limit; the next ones make up for it
    for i in range(size.runs):
        faults = FAULT_SETS[i % len(FAULT_SETS)]
        switches = {}
        if "crash" in faults:
            switches["AGENT_DIE_AFTER"] = rng.randint(1, STEPS)
        if "stall" in faults:
            switches["AGENT_STALL_AT"] = rng.randint(1, STEPS)
        if "fresh_context" in faults:
            switches["AGENT_FRESH_CONTEXT_AFTER"] = rng.randint(1, STEPS - 1)
        provider: Literal["local", "runtime"] = "local" if i % 2 == 0 else "runtime"
        if "time_limit" in faults and provider not in size.time_limit_providers:
            provider, owed_runtime = "local", owed_runtime + 1
        elif provider == "local" and owed_runtime and "time_limit" not in faults:
            provider, owed_runtime = "runtime", owed_runtime - 1
        plans.append(
            RunPlan(
                run_id=f"{prefix}-{i:02d}",
                provider=provider,
                faults=faults,
                switches=switches,
            )
        )
    return plans


def run_spec(size: ChaosSize, plan: RunPlan, origin: Path, ledger: Path) -> RunSpec:
    limited = plan.has("time_limit")
    env = {
        "OVERNIGHT_LEDGER_URL": ledger_url(ledger),
        "AGENT_STEP_DELAY": str(size.time_limit_step_delay if limited else size.step_delay),
        **{name: str(step) for name, step in plan.switches.items()},
    }
    return RunSpec(
        run_id=plan.run_id,
        **origin_fields(origin, plan.provider),
        agent_dir=str(AGENT_DIR),
        command=COMMAND,
        env=env,
        provider=plan.provider,
        poll_seconds=1,
        stall_seconds=size.stall_seconds,
        sandbox_timeout_seconds=size.time_limit_seconds if limited else ROOMY_LIMIT_SECONDS,
        # Time-limited runs need several sandboxes; the budget must never be what stops a run.
        budget=Budget(max_restarts=15, max_hours=2),
    )
