"""Short, readable text for people, and one JSON document for programs. Pure functions."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel

from overnight.cli.client import ReapedSandbox, RunSummary
from overnight.core.agent_text import terminal_line
from overnight.core.agent_text import terminal_safe as terminal_safe  # its home is agent_text
from overnight.core.checkpoint_text import parse
from overnight.core.ci_rounds import ci_line
from overnight.core.models import BudgetExtension, RunResult, RunStatus
from overnight.core.provider_traits import traits
from overnight.core.status_lines import age, safety_net_line, usd
from overnight.worker.reap_entries import released_line
from workflows.pure.status_facts import Fact, Row, lay_out, status_facts

# `overnight status` shows this many lines of the last words (`overnight logs` has the rest).
STATUS_TAIL_LINES = 10


def json_document(value: BaseModel | Sequence[BaseModel] | dict[str, Any]) -> str:
    if isinstance(value, BaseModel):
        data: Any = value.model_dump(mode="json")
    elif isinstance(value, dict):
        data = {
            k: v.model_dump(mode="json") if isinstance(v, BaseModel) else v
            for k, v in value.items()
        }
    else:
        data = [item.model_dump(mode="json") for item in value]
    return json.dumps(data, indent=2)


def budget_left(status: RunStatus) -> str:
    budget = status.budget
    restarts = max(0, budget.max_restarts - status.restarts_used)
    hours = max(0.0, budget.max_hours - status.hours_used)
    parts = [f"{restarts} restart{'s' if restarts != 1 else ''}", f"{hours:.1f} h"]
    if budget.max_spend_usd is not None:
        parts.append(usd(max(0.0, budget.max_spend_usd - status.spend_usd)))
    return ", ".join(parts)


def _plain(text: str) -> str:
    """Ids marked as code (`snap-1`) shown plain: a terminal shows no code spans."""
    return text.replace("`", "")


def _step(text: str) -> str:
    """The agent's next step on one line; `-` when it wrote none, or an empty one."""
    return terminal_line(text) if text else "-"


def _as_is(text: str) -> str:
    return text


# `overnight status`'s lines below its first, in order: the facts each shows, under what label
# and how (agent text folded onto its line: a newline in it would print a line that looks like
# one of these). Facts the card shows too are made in workflows/pure/status_facts.py.
STATUS_ROWS: tuple[Row, ...] = (
    ("next step", "step", _step),
    ("last note", "last note", terminal_line),
    ("budget left", "budget left", _as_is),
    ("last progress", "last progress", _as_is),
    ("stall watch", "stall watch", _as_is),
    ("waited", "waited", _as_is),
    ("charged", "charged", _as_is),
    ("lease ends", "lease ends", _as_is),
    ("sandbox", "sandbox", _as_is),
    ("network", "network", terminal_line),
    ("snapshot", "snapshot", _plain),
    ("failed", "failed", terminal_line),
    ("cancelled", "cancelled", terminal_line),
    ("needs you", "needs you", terminal_line),
    ("talk", None, terminal_line),
    ("restarts", "restarts", _as_is),
    ("safety net", "safety net", _as_is),
    ("done check", "done check", terminal_line),
    ("workspace", "workspace", lambda text: terminal_line(_plain(text))),
    ("pushed", "pushed", lambda commit: f"{commit}, on the origin"),
    ("pull request", "pull request", terminal_line),
    ("CI", "CI", terminal_line),
    ("Web UI", "Web UI", _as_is),
)


def _status_line(label: str, text: str) -> str:
    return f"  {label + ':':<14} {text}"


def status_text(status: RunStatus, *, now: datetime, ui_url: str | None) -> str:
    lines = [
        f"{status.run_id}: {status.state}, attempt {status.attempt}"
        + (f" (sandbox {status.sandbox_id}" if status.sandbox_id else "")
        + (f" on host {status.host}" if status.sandbox_id and status.host else "")
        + (")" if status.sandbox_id else ""),
    ]
    facts = status_facts(status, now) + _status_only_facts(status, now, ui_url)
    lines += lay_out(facts, STATUS_ROWS, _status_line)
    words = status.last_words
    if words is not None and words.tail:
        shown = words.tail.splitlines()[-STATUS_TAIL_LINES:]
        more = words.truncated or len(words.tail.splitlines()) > len(shown)
        lines.append(
            f"  last words:    attempt {words.attempt}, {words.reason} ({words.at:%H:%M:%S} UTC)"
            + (f"; more: overnight logs {status.run_id} --attempt {words.attempt}" if more else "")
        )
        lines += [f"    | {line}" for line in shown]
    return terminal_safe("\n".join(lines))


def _status_only_facts(status: RunStatus, now: datetime, ui_url: str | None) -> list[Fact]:
    """What `overnight status` shows and the card does not, or says otherwise."""
    summary = status.checkpoint_summary
    facts = [Fact("budget left", f"{budget_left(status)} (spent {usd(status.spend_usd)})")]
    if summary and summary.last_note:
        facts.append(Fact("last note", summary.last_note))
    if status.wait_hours_used > 0:
        waited = f"{status.wait_hours_used:.1f} of {status.budget.max_wait_hours:g} h"
        facts.append(Fact("waited", f"{waited} (paused for the agent's questions and waits)"))
    if status.lease_ends_at is not None and status.state in ("running", "restarting"):
        woken = f", woken {status.lease_resumes}x at its end" if status.lease_resumes else ""
        facts.append(Fact("lease ends", f"{until(status.lease_ends_at, now)}{woken}"))
    if status.restarts:
        last = status.restarts[-1]
        facts.append(
            Fact("restarts", f"{len(status.restarts)}, last: {terminal_line(last.reason)}")
        )
    if ui_url:
        facts.append(Fact("Web UI", ui_url))
    return facts


def until(moment: datetime, now: datetime) -> str:
    """`in 42m (14:05 UTC)`; `passed (14:05 UTC)` once it is behind."""
    seconds = int((moment - now).total_seconds())
    clock = f"{moment.astimezone(UTC):%H:%M} UTC"
    if seconds < 0:
        return f"passed ({clock})"
    if seconds < 3600:
        return f"in {max(1, seconds // 60)}m ({clock})"
    return f"in {seconds // 3600}h{seconds % 3600 // 60:02d}m ({clock})"


def timeline_text(status: RunStatus) -> str:
    """When each attempt started, and why the one before it ended."""
    lines = [f"  {status.started_at:%H:%M:%S}  attempt 1 started"]
    for record in status.restarts:
        lines.append(
            f"  {record.at:%H:%M:%S}  attempt {record.attempt} ended: {record.reason}"
            f" -> attempt {record.attempt + 1} from the last checkpoint"
        )
    lines.append(f"            attempt {status.attempt}: {status.state}")
    return terminal_safe("\n".join(lines))


def checkpoint_text(text: str | None) -> str:
    """The sample agent's checkpoint as a few lines; any other checkpoint as it is."""
    if not text:
        return "  (none)"
    ok, data = parse(text)
    try:
        if not ok:
            raise ValueError("not JSON")
        step, done, notes = data["step"], data["done"], data.get("notes", [])
        lines = [f"  step {step}, {len(done)} done, next: {data.get('next', '-')}"]
        lines += [f"    - {note}" for note in notes]
    except (ValueError, KeyError, TypeError, AttributeError):
        lines = [f"  {line}" for line in text.splitlines()]
    return terminal_safe("\n".join(lines))


def runs_text(runs: Sequence[RunSummary], *, now: datetime) -> str:
    if not runs:
        return "no runs"
    rows = [("RUN", "STATE", "RESTARTS", "LAST PROGRESS", "STARTED")]
    for run in runs:
        state = run.state or run.workflow_status
        if run.workflow_status != "running" and run.state and run.state != run.workflow_status:
            state = f"{run.state} ({run.workflow_status})"
        rows.append(
            (
                run.run_id,
                state,
                "-" if run.restarts is None else str(run.restarts),
                age(run.last_progress_at, now) if run.last_progress_at else "-",
                age(run.started_at, now),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for n, row in enumerate(rows):
        lines.append(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        )
        if n > 0:  # what the run waits on, under its row
            lines += [f"  waiting on: {terminal_line(line)}" for line in runs[n - 1].waiting_on]
    return "\n".join(lines)


def result_text(result: RunResult) -> str:
    text = (
        f"{result.run_id}: {result.outcome} after {_count(result.attempts, 'attempt')} "
        f"({_count(result.restarts, 'restart')}, {result.hours_used:.2f} h, "
        f"${result.spend_usd:.4f})"
    )
    lines = [text]
    outputs = result.outputs
    if outputs is not None:
        # The agent's words, each on its line (as in `status`): none prints a line of its own.
        lines += [f"  result: {terminal_line(outputs.summary)}"] if outputs.summary else []
        lines += [
            f"  output {terminal_line(name)}: {terminal_line(value)}"
            for name, value in outputs.values.items()
        ]
    if result.pushed_commit:
        lines.append(f"  pushed: {result.pushed_commit[:12]}, on the origin")
    if result.pull_request_url:
        lines.append(f"  pull request: {terminal_line(result.pull_request_url)}")
    checks = ci_line(result.ci)
    if checks:
        lines.append(f"  CI: {terminal_line(checks)}")
    net = safety_net_line(result.safety_net)
    return terminal_safe("\n".join(lines + ([f"safety net: {net}"] if net else [])))


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def reaped_text(reaped: Sequence[ReapedSandbox]) -> str:
    if not reaped:
        return "nothing to reap"
    lines = []
    for entry in reaped:
        if entry.kind == "released":
            lines.append(released_line(entry))
            continue
        if not entry.stopped:
            frees = entry.kind != "sandbox" or traits(entry.provider).stop_frees_files
            verb = "delete" if frees else "stop"
            what = f"could not {verb} ({entry.detail})"
        elif entry.kind == "sandbox" and entry.freed_bytes is None:
            what = "stopped (a stopped sandbox keeps nothing)"
        else:
            what = "deleted"
        if entry.why:
            what += f": {entry.why}"
        if entry.freed_bytes:
            what += f"; freed {size_text(entry.freed_bytes)}"
        of = f" of {entry.run_id}" if entry.run_id else ""
        lines.append(f"{entry.provider} {entry.kind} {entry.sandbox_id}{of}: {what}")
    stopped = sum(entry.stopped for entry in reaped if entry.kind == "sandbox")
    lines.append(f"reaped {stopped} sandbox{'es' if stopped != 1 else ''}")
    deleted = sum(entry.stopped for entry in reaped if entry.kind == "snapshot")
    if deleted:
        lines[-1] += f" and {deleted} snapshot{'s' if deleted != 1 else ''}"
    freed = sum(entry.freed_bytes or 0 for entry in reaped if entry.stopped)
    lines[-1] += f"; freed {size_text(freed)} of this machine's disk"
    released = [entry for entry in reaped if entry.kind == "released" and entry.stopped]
    if released:
        memory = sum(entry.memory_bytes or 0 for entry in released)
        lines[-1] += (
            f"; {len(released)} kept sandbox{'es' if len(released) != 1 else ''} let go of "
            f"{size_text(memory)} of memory"
        )
    return "\n".join(lines)


def size_text(n: int) -> str:
    """A size for people: bytes, KiB, MiB, GiB."""
    if n < 1024:
        return f"{n} B"
    size = n / 1024
    for unit in ("KiB", "MiB"):
        if size < 1024:
            return f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"


def extension_text(extension: BudgetExtension) -> str:
    parts = []
    if extension.restarts:
        parts.append(f"{extension.restarts} restart{'s' if extension.restarts != 1 else ''}")
    if extension.hours:
        parts.append(f"{extension.hours:g} h")
    if extension.spend_usd:
        parts.append(f"${extension.spend_usd:.2f}")
    if extension.wait_hours:
        parts.append(f"{extension.wait_hours:g} h of waits")
    if extension.done_checks:
        checks = extension.done_checks
        parts.append(f"{checks} failed done-check round{'s' if checks != 1 else ''}")
    if extension.ci_rounds:
        rounds = extension.ci_rounds
        parts.append(f"{rounds} CI round{'s' if rounds != 1 else ''}")
    return ", ".join(parts) or "nothing"
