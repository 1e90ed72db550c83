"""Judging a chaos run from what it left behind: results, ledgers, checkpoints, sandboxes.

Pure functions over collected facts, plus `render_table`. A restart is *explained* when its
reason is one of the agent faults that run carried (a crash or a stall, once each); every other
restart was caused by a transient fault and counts against overnight. A lease end explains no
restart: the sandbox pauses and the run goes on with the same agent.

A step is *redone* when the agent did it twice: each step is a commit the agent pushes to the
run's branch in its origin, so a step done again is a second commit of it. A crash after a
step's work (before its checkpoint) redoes that one step by design; any other redo counts
against overnight.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from overnight.core.models import RestartRecord, RunResult
from tests.chaos.plan import POLL_SECONDS, STEPS, RunPlan
from workflows.policies import DEADLINE_OBSERVE_GRACE, STALL_READ_TIMEOUT

if TYPE_CHECKING:
    from tests.chaos.takeover import TakeoverReport

_RESUMED = re.compile(r"^attempt (\d+) resumed at step (\d+): (.*)$")
_STEP_COMMIT = re.compile(r"^step (\d+): ")
# How late a stall may be acted on after the run's own deadline (its last progress as it saw
# it, plus `stall_seconds`): the run's poll, the grace of the look at the deadline, once more
# for a look lost with its worker (each such look costs the grace alone, issue #36), the
# confirming read's timeout (one lost with its worker is retried after it), and a margin for a
# loaded machine. Time with no worker alive at all does not count.
STALL_LATE_MARGIN = 5.0


def stall_late_allowed(poll_seconds: float) -> float:
    grace = DEADLINE_OBSERVE_GRACE.total_seconds()
    read = STALL_READ_TIMEOUT.total_seconds()
    return poll_seconds + 2 * grace + read + STALL_LATE_MARGIN


# How each agent fault shows as a restart reason, and how often one injection may cause it.
_REASONS: dict[str, tuple[re.Pattern[str], int | None]] = {
    "crash": (re.compile(r"^agent crashed \(exit 3\)$"), 1),
    "stall": (re.compile(r"^agent stalled "), 1),
}


@dataclass
class RunFacts:
    """Everything collected about one run after the chaos."""

    plan: RunPlan
    result: RunResult | None = None
    failure: str | None = None  # why there is no result
    restarts: list[RestartRecord] = field(default_factory=list)
    fresh_starts: int = 0
    ledger_keys: list[str] = field(default_factory=list)
    fired_switches: list[str] = field(default_factory=list)
    # When the agent began to stall (Unix time), and after how long a stall counts.
    stalls_began: list[float] = field(default_factory=list)
    stall_seconds: float = 0.0
    # (start, end) Unix times with no worker alive (the dead man's window).
    no_worker_spans: list[tuple[float, float]] = field(default_factory=list)
    # Checkpoint step each attempt's sandbox last held (attempt number -> step).
    sandbox_steps: dict[int, int] = field(default_factory=dict)
    sandboxes_running: list[str] = field(default_factory=list)
    sandboxes_paused: list[str] = field(default_factory=list)
    live_agent_pids: list[int] = field(default_factory=list)
    # Subjects of the commits on the run's branch in its origin, oldest first.
    branch_commits: list[str] = field(default_factory=list)
    # Lease ends the harness made this run meet: with workers alive, and with none alive
    # (`paused_unwatched`: of those, the ones seen paused while no worker was alive).
    lease_ends: int = 0
    lease_ends_preempted: int = 0  # made, but an extension moved the lease first
    lease_ends_unwatched: int = 0
    paused_unwatched: int = 0
    # Of those, the ones whose agent was frozen then (nothing of it ran while paused).
    frozen_unwatched: int = 0
    # Times a sandbox paused at its lease end was woken and its agent carried on (status).
    lease_resumes: int = 0
    # The run's status could not be queried: its restarts and lease resumes are unknown.
    status_unreadable: bool = False


@dataclass(frozen=True)
class RunVerdict:
    finished: bool
    duplicates: int
    missing_actions: int
    checkpoint_lost: bool
    lost_detail: str
    explained_restarts: int
    transient_restarts: list[str]
    left_running: int
    steps_redone: int


def judge_run(facts: RunFacts) -> RunVerdict:
    keys = Counter(facts.ledger_keys)
    wanted = {f"{facts.plan.run_id}-step-{n}" for n in (4, 5)}
    lost, detail = checkpoint_loss(facts)
    explained, transient = classify_restarts(facts.plan, facts.restarts)
    return RunVerdict(
        finished=facts.result is not None and facts.result.outcome == "finished",
        duplicates=sum(count - 1 for count in keys.values()),
        missing_actions=len(wanted - set(keys)) if facts.result is not None else 0,
        checkpoint_lost=lost,
        lost_detail=detail,
        explained_restarts=explained,
        transient_restarts=transient,
        left_running=len(facts.sandboxes_running) + (1 if facts.live_agent_pids else 0),
        steps_redone=steps_redone(facts),
    )


def steps_redone(facts: RunFacts) -> int:
    """Steps the agent did more than once, beyond the one each fired crash redoes."""
    done = Counter(
        int(m.group(1)) for subject in facts.branch_commits if (m := _STEP_COMMIT.match(subject))
    )
    extra = sum(count - 1 for count in done.values())
    crashes = sum(1 for switch in facts.fired_switches if switch.startswith("died-after-"))
    return max(0, extra - crashes)


def classify_restarts(plan: RunPlan, restarts: list[RestartRecord]) -> tuple[int, list[str]]:
    """(restarts explained by an injected agent fault, reasons of the others)."""
    allowance = {
        fault: limit
        for fault, (_, limit) in _REASONS.items()
        if plan.has(fault)  # type: ignore[arg-type]
    }
    explained, transient = 0, []
    for record in restarts:
        fault = next((f for f, (rx, _) in _REASONS.items() if rx.search(record.reason)), None)
        if fault is None or fault not in allowance:
            transient.append(record.reason)
            continue
        left = allowance[fault]
        if left is not None:
            if left <= 0:
                transient.append(record.reason)
                continue
            allowance[fault] = left - 1
        explained += 1
    return explained, transient


def checkpoint_loss(facts: RunFacts) -> tuple[bool, str]:
    """Whether any checkpoint was lost: the final one must list every step, and every new
    sandbox must resume right after the last step its predecessor had checkpointed."""
    if facts.result is None:
        return False, ""  # counted as not finished instead
    try:
        final: Any = json.loads(facts.result.checkpoint or "")
    except ValueError:
        return True, "final checkpoint is not JSON"
    if (
        not isinstance(final, dict)
        or final.get("step") != STEPS
        or len(final.get("done", [])) != STEPS
    ):
        return (
            True,
            f"final checkpoint lists {final.get('done') if isinstance(final, dict) else final!r}",
        )
    notes = [str(n) for n in final.get("notes", [])]
    done_notes = {int(m.group(1)) for n in notes if (m := re.match(r"^step (\d+): ", n))}
    if done_notes != set(range(1, STEPS + 1)):
        return True, f"notes cover steps {sorted(done_notes)}"
    for note in notes:
        match = _RESUMED.match(note)
        if match is None or "fresh start" in match.group(3):
            continue
        attempt, resumed_at = int(match.group(1)), int(match.group(2))
        before = facts.sandbox_steps.get(attempt - 1)
        if before is not None and resumed_at != before + 1:
            return (
                True,
                f"attempt {attempt} resumed at step {resumed_at}; "
                f"sandbox {attempt - 1} had reached {before}",
            )
    return False, ""


def stall_lateness(facts: RunFacts) -> list[float]:
    """For each stall noticed as one: seconds between the agent's stall deadline (when it
    began to stall, plus the threshold) and the restart. Shown: it also holds how late the
    run saw the agent's last progress (a watch taken over from a SIGKILLed worker waits out
    the observe's heartbeat timeout)."""
    restarts = _stall_restarts(facts)
    return [
        record.at.timestamp() - (began + facts.stall_seconds)
        for began, record in zip(sorted(facts.stalls_began), restarts, strict=False)
    ]


def stall_lateness_own(facts: RunFacts) -> list[float]:
    """For each stall restart: seconds between the run's own deadline (its last progress as
    it saw it, plus the threshold) and the restart, time with no worker alive left out. The
    verdict holds these to `stall_late_allowed`."""
    late = []
    for record in _stall_restarts(facts):
        if record.last_progress_at is None:
            continue
        deadline = record.last_progress_at.timestamp() + facts.stall_seconds
        acted = record.at.timestamp()
        nobody = sum(
            max(0.0, min(end, acted) - max(start, deadline)) for start, end in facts.no_worker_spans
        )
        late.append(acted - deadline - nobody)
    return late


def _stall_restarts(facts: RunFacts) -> list[RestartRecord]:
    return [r for r in facts.restarts if _REASONS["stall"][0].search(r.reason)]


def checkpoint_step(path: Path) -> int | None:
    """The `step` of a sample agent checkpoint file, if there is a readable one."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    step = value.get("step") if isinstance(value, dict) else None
    return step if isinstance(step, int) else None


@dataclass
class ChaosReport:
    runs: list[RunFacts]
    infra_faults: dict[str, int]
    worker_self_exits: int
    seconds: float
    notes: list[str] = field(default_factory=list)
    # A worker gone and its watches taken over elsewhere (measured on a stack of its own).
    takeover: TakeoverReport | None = None

    def verdicts(self) -> list[RunVerdict]:
        return [judge_run(facts) for facts in self.runs]

    def figures(self) -> dict[str, int]:
        verdicts = self.verdicts()
        return {
            "runs": len(self.runs),
            "finished": sum(v.finished for v in verdicts),
            "duplicates": sum(v.duplicates for v in verdicts),
            "missing_actions": sum(v.missing_actions for v in verdicts),
            "checkpoints_lost": sum(v.checkpoint_lost for v in verdicts),
            "left_running": sum(v.left_running for v in verdicts),
            "left_paused": sum(len(f.sandboxes_paused) for f in self.runs),
            "explained_restarts": sum(v.explained_restarts for v in verdicts),
            "transient_restarts": sum(len(v.transient_restarts) for v in verdicts),
            "steps_redone": sum(v.steps_redone for v in verdicts),
            "lease_ends": sum(f.lease_ends + f.lease_ends_unwatched for f in self.runs),
            "lease_ends_preempted": sum(f.lease_ends_preempted for f in self.runs),
            "lease_ends_unwatched": sum(f.lease_ends_unwatched for f in self.runs),
            "paused_unwatched": sum(f.paused_unwatched for f in self.runs),
            "frozen_unwatched": sum(f.frozen_unwatched for f in self.runs),
            "lease_resumes": sum(f.lease_resumes for f in self.runs),
            "stall_late_max": round(
                max((x for f in self.runs for x in stall_lateness(f)), default=0)
            ),
            "stall_late_own_max": round(
                max((x for f in self.runs for x in stall_lateness_own(f)), default=0)
            ),
        }

    def stall_late_allowed(self) -> float:
        return stall_late_allowed(POLL_SECONDS)

    def agent_faults(self) -> dict[str, tuple[int, int]]:
        """Agent fault kind -> (runs carrying it, times it fired)."""
        carried: Counter[str] = Counter()
        fired: Counter[str] = Counter()
        for facts in self.runs:
            for fault in facts.plan.faults:
                carried[fault] += 1
            for switch in facts.fired_switches:
                kind = switch.split("-", 1)[0]
                fired[{"died": "crash", "stalled": "stall", "fresh": "fresh_context"}[kind]] += 1
            fired["lease_end"] += facts.lease_ends
        return {
            kind: (carried[kind], fired[kind])
            for kind in ("crash", "stall", "fresh_context", "lease_end")
        }

    def ok(self) -> bool:
        f = self.figures()
        return (
            f["finished"] == f["runs"]
            and f["duplicates"] == 0
            and f["missing_actions"] == 0
            and f["checkpoints_lost"] == 0
            and f["left_running"] == 0
            and f["transient_restarts"] == 0
            and f["steps_redone"] == 0
            and f["paused_unwatched"] == f["lease_ends_unwatched"]
            and f["frozen_unwatched"] == f["paused_unwatched"]
            and f["stall_late_own_max"] <= self.stall_late_allowed()
            and not any(facts.status_unreadable for facts in self.runs)
            and (self.takeover is None or not self.takeover.problems())
        )

    def run_lines(self) -> list[str]:
        """One line per run: provider, faults, outcome and why each restart happened."""
        lines = []
        for facts in self.runs:
            outcome = facts.result.outcome if facts.result else f"NOT FINISHED ({facts.failure})"
            reasons = "; ".join(r.reason for r in facts.restarts) or "no restarts"
            faults = "+".join(facts.plan.faults) or "none"
            leases = (
                f"lease ends {facts.lease_ends}+{facts.lease_ends_unwatched} unwatched, "
                f"woken {facts.lease_resumes}"
            )
            lines.append(
                f"{facts.plan.run_id} {facts.plan.provider:<7} {faults:<26} {outcome}: "
                f"{reasons}; {leases}"
            )
        return lines

    def problems(self) -> list[str]:
        lines = []
        for facts, verdict in zip(self.runs, self.verdicts(), strict=True):
            rid = facts.plan.run_id
            if not verdict.finished:
                lines.append(f"{rid}: not finished ({facts.failure})")
            if facts.status_unreadable:
                lines.append(f"{rid}: status unreadable: restarts and lease resumes unknown")
            if verdict.duplicates or verdict.missing_actions:
                lines.append(f"{rid}: ledger {facts.ledger_keys}")
            if verdict.checkpoint_lost:
                lines.append(f"{rid}: checkpoint lost: {verdict.lost_detail}")
            if verdict.transient_restarts:
                lines.append(
                    f"{rid} ({', '.join(facts.plan.faults) or 'no faults'}): "
                    f"unexplained restarts {verdict.transient_restarts}"
                )
            if verdict.steps_redone:
                lines.append(
                    f"{rid}: {verdict.steps_redone} step(s) redone: {facts.branch_commits}"
                )
            late = max(stall_lateness_own(facts), default=0.0)
            if late > self.stall_late_allowed():
                lines.append(
                    f"{rid}: stall acted on {late:.0f} s after its own deadline "
                    f"(allowed {self.stall_late_allowed():.0f} s)"
                )
            if facts.paused_unwatched != facts.lease_ends_unwatched:
                lines.append(
                    f"{rid}: {facts.lease_ends_unwatched - facts.paused_unwatched} sandbox(es) "
                    "not paused at a lease end with no worker alive"
                )
            if facts.frozen_unwatched != facts.paused_unwatched:
                lines.append(
                    f"{rid}: {facts.paused_unwatched - facts.frozen_unwatched} paused "
                    "sandbox(es) whose agent still ran"
                )
            if verdict.left_running:
                lines.append(
                    f"{rid}: left running {facts.sandboxes_running} pids {facts.live_agent_pids}"
                )
        if self.takeover is not None:
            lines += [f"take-over too slow: {line}" for line in self.takeover.problems()]
        return lines


_AGENT_FAULT_NAMES = {
    "crash": "agent crash (exit 3 mid-step)",
    "stall": "agent stall (hangs before a step)",
    "fresh_context": "fresh-context exit (code 75)",
    "lease_end": "lease end met, workers alive",
}


def takeover_rows(report: TakeoverReport) -> list[tuple[str, str]]:
    rows = [("worker gone: its runs' watches held by another worker after", "")]
    for takeover, name in (
        (report.graceful, "  SIGTERM (graceful; target <= 10 s)"),
        (report.killed, "  SIGKILL (target <= 5 min)"),
    ):
        if takeover is None:
            continue
        taken = [s for s in takeover.seconds.values() if s is not None]
        value = f"{max(taken):.1f} s at most" if taken else "never"
        value += f" ({len(taken)} of {takeover.runs} runs"
        if takeover.exit_seconds is not None:
            value += f"; the worker exited in {takeover.exit_seconds:.1f} s"
        rows.append((name, value + ")"))
    return rows


def render_takeover(report: TakeoverReport) -> str:
    rows = takeover_rows(report)
    width = max(len(name) for name, _ in rows) + 2
    return "\n".join(f"{name:<{width}}{value}" for name, value in rows)


def render_table(report: ChaosReport) -> str:
    f = report.figures()
    rows: list[tuple[str, str]] = [("faults injected", "")]
    for kind, (carried, fired) in report.agent_faults().items():
        rows.append((f"  {_AGENT_FAULT_NAMES[kind]}", f"{fired} (in {carried} runs)"))
    rows.append(("  lease end made, extended away before it came", str(f["lease_ends_preempted"])))
    rows.append(
        (
            "  lease end met with no worker alive",
            f"{f['lease_ends_unwatched']} (paused then: {f['paused_unwatched']}, "
            f"frozen: {f['frozen_unwatched']})",
        )
    )
    for name, count in report.infra_faults.items():
        rows.append((f"  {name}", str(count)))
    rows += [
        ("outcome", ""),
        ("  runs finished", f"{f['finished']} / {f['runs']}"),
        ("  duplicate outside actions (ledger)", str(f["duplicates"])),
        ("  missing outside actions (ledger)", str(f["missing_actions"])),
        ("  checkpoints lost", str(f["checkpoints_lost"])),
        ("  steps redone (beyond a crash's own step)", str(f["steps_redone"])),
        ("  lease ends carried on by the same agent", str(f["lease_resumes"])),
        ("  sandboxes left running", str(f["left_running"])),
        ("  sandboxes left paused", str(f["left_paused"])),
        ("  restarts explained by agent faults", str(f["explained_restarts"])),
        ("  restarts caused by transient faults", str(f["transient_restarts"])),
        (
            "  stall acted on after the run's own deadline by (max)",
            f"{f['stall_late_own_max']} s (allowed {report.stall_late_allowed():.0f} s)",
        ),
        ("  stall noticed after the agent's stall deadline by (max)", f"{f['stall_late_max']} s"),
        ("  worker exits not caused by the harness", str(report.worker_self_exits)),
        ("  wall time", f"{report.seconds:.0f} s"),
    ]
    if report.takeover is not None:
        rows += takeover_rows(report.takeover)
    width = max(len(name) for name, _ in rows) + 2
    lines = [f"{name:<{width}}{value}" for name, value in rows]
    return "\n".join(lines)
