"""What a chaos run does: its size, the faults each agent carries, and the specs. Pure logic.

Every agent fault is one of the sample agent's own switches (they fire once per run) or a lease
end the harness makes happen (`lease_end`: time passing, as `LocalEngine.set_lease_end` and the
fake's `end_lease_in` let it); the infrastructure faults (worker kills, a window with every
worker down, a dev server restart, a Runtime API storm) are scheduled by the harness from the
`ChaosSize`. Every spec stays within the real Runtime API's limits (leases 60..3600 s).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from fakes.git_http import origin_fields
from overnight.core.models import Budget, RunSpec
from overnight.demo.outside_world import host_ports_for, ledger_url
from overnight.demo.sample_demo import AGENT_DIR

AgentFault = Literal["crash", "stall", "fresh_context", "lease_end"]
AGENT_FAULTS: tuple[AgentFault, ...] = ("crash", "stall", "fresh_context", "lease_end")
STEPS = 5
COMMAND = "python3 /workspace/agent/main.py --resume /workspace/checkpoint.json"

ROOMY_LIMIT_SECONDS = 1800.0
# The lease of runs carrying `lease_end`: Runtime's shortest, so a long run's lease is extended
# while it progresses, and the lease ends the harness makes come on top.
SHORT_LEASE_SECONDS = 60.0

# Fault sets handed out in turn, so even a small run meets every kind.
FAULT_SETS: tuple[tuple[AgentFault, ...], ...] = (
    ("crash",),
    ("stall",),
    ("fresh_context",),
    ("lease_end",),
    ("crash", "fresh_context"),
    ("stall", "crash"),
    ("lease_end", "fresh_context"),
    ("crash", "lease_end"),
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
    # Every worker SIGKILLed at once for a while, and the lease of every running sandbox ended
    # meanwhile: nobody is left to extend or wake, so the sandboxes must pause (a dead man's
    # switch) and the runs go on when the workers are back.
    dead_man_at: float | None = None
    dead_man_seconds: float = 8.0
    deadline_seconds: float = 1200.0
    seed: int = 7
    # How long each agent step takes, and what counts as a stall: well above a step on a
    # loaded 2-core machine, short enough that a stalled agent is noticed during the chaos.
    step_delay: float = 1.0
    stall_seconds: float = 15.0
    # Runs carrying `lease_end`: slower steps (time for the lease ends to land mid-step), and
    # how many lease ends the harness makes each of them meet (after random checkpoints).
    leased_step_delay: float = 2.5
    lease_ends_per_run: int = 1


# Runs last minutes (steps of 20 s), so every shake meets runs in every phase, and a leased
# run outlives its 60 s lease (extended while it progresses).
FULL = ChaosSize(
    runs=20,
    storm_at=30.0,
    server_restart_at=100.0,
    dead_man_at=150.0,
    dead_man_seconds=12.0,
    deadline_seconds=1500.0,
    step_delay=20.0,
    stall_seconds=60.0,
    leased_step_delay=20.0,
    lease_ends_per_run=2,
)
REDUCED = ChaosSize(
    runs=5,
    worker_kill_every=8.0,  # both kills land while runs are still going
    max_worker_kills=2,
    storm_at=1.0,  # while sandboxes are made: the watch itself makes few requests
    storm_seconds=10.0,
    dead_man_at=5.0,
    dead_man_seconds=5.0,
    # A cap on waiting for the runs to end, not a speed: they take about a minute on a quiet
    # machine, twice that on CI; a run still open at the cap fails the test.
    deadline_seconds=300.0,
)


# How closely each run is watched (the stall's allowed lateness follows it: verdict.py).
POLL_SECONDS = 1.0


@dataclass(frozen=True)
class RunPlan:
    run_id: str
    provider: Literal["local", "runtime"]
    faults: tuple[AgentFault, ...]
    # Step numbers the agent switches fire at (1..5).
    switches: dict[str, int] = field(default_factory=dict)
    # `lease_end`: the harness ends the sandbox's lease once the agent has checkpointed each
    # of these steps (while it works on the next one).
    lease_end_after: tuple[int, ...] = ()

    def has(self, fault: AgentFault) -> bool:
        return fault in self.faults


def plan_runs(size: ChaosSize, prefix: str) -> list[RunPlan]:
    """One plan per run: providers alternate, fault sets go round, step numbers are random."""
    rng = random.Random(size.seed)
    plans = []
    for i in range(size.runs):
        faults = FAULT_SETS[i % len(FAULT_SETS)]
        switches = {}
        if "crash" in faults:
            switches["AGENT_DIE_AFTER"] = rng.randint(1, STEPS)
        if "stall" in faults:
            switches["AGENT_STALL_AT"] = rng.randint(1, STEPS)
        if "fresh_context" in faults:
            switches["AGENT_FRESH_CONTEXT_AFTER"] = rng.randint(1, STEPS - 1)
        lease_end_after: tuple[int, ...] = ()
        if "lease_end" in faults:
            count = min(size.lease_ends_per_run, STEPS - 1)
            lease_end_after = tuple(sorted(rng.sample(range(1, STEPS), count)))
        plans.append(
            RunPlan(
                run_id=f"{prefix}-{i:02d}",
                provider="local" if i % 2 == 0 else "runtime",
                faults=faults,
                switches=switches,
                lease_end_after=lease_end_after,
            )
        )
    return plans


def run_spec(size: ChaosSize, plan: RunPlan, origin: Path, ledger: Path) -> RunSpec:
    leased = plan.has("lease_end")
    env = {
        "OVERNIGHT_LEDGER_URL": ledger_url(ledger),
        "AGENT_STEP_DELAY": str(size.leased_step_delay if leased else size.step_delay),
        **{name: str(step) for name, step in plan.switches.items()},
    }
    return RunSpec(
        run_id=plan.run_id,
        **origin_fields(origin, plan.provider),
        agent_dir=str(AGENT_DIR),
        command=COMMAND,
        env=env,
        provider=plan.provider,
        host_ports=host_ports_for(env["OVERNIGHT_LEDGER_URL"], plan.provider),
        # Nothing kept paused for a look at the end: the verdict counts every live process.
        keep_failed_days=0,
        poll_seconds=POLL_SECONDS,
        stall_seconds=size.stall_seconds,
        sandbox_timeout_seconds=SHORT_LEASE_SECONDS if leased else ROOMY_LIMIT_SECONDS,
        # The budget must never be what stops a run.
        budget=Budget(max_restarts=15, max_hours=2),
    )
