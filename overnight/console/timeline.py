"""A run's timeline: its attempts, the restarts between them with their causes, the times it
was held (a question, a wait, a pause for a person), its done checks, its lease ends and what
people did to it, on one time axis. Pure.

Built from the `status` query's answer (attempts and restarts, the done checks of the latest
round, what holds the run now) and, for what the status keeps no record of (past questions
and waits, lease ends, earlier done-check rounds, cancels, extensions, answers, rewinds), the
marks read from the run's history (overnight/console/run_events.py). Every label holds agent
text as it is: the page shows it as text (overnight/console/timeline_svg.py lays it out, the
template escapes it).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from overnight.core.models import RunStatus

MarkKind = Literal["pause", "wake", "done_check", "cancel", "extend", "answer", "rewind"]
HoldKind = Literal["question", "wait", "attention"]
ENDED = frozenset({"finished", "cancelled", "failed"})
# What a pause's reason (its activity summary: workflows/kit_request_steps.py) says it was for.
_HOLD_PREFIXES: tuple[tuple[str, HoldKind], ...] = (
    ("question ", "question"),
    ("wait until ", "wait"),
    ("needs attention", "attention"),
)
_LEASE_WAKE = "lease ended"


@dataclass(frozen=True)
class Mark:
    """One thing the run's history says happened: `detail` is the activity's summary, or what
    a person sent (a cancel's reason, an extension)."""

    at: datetime
    kind: MarkKind
    detail: str = ""


@dataclass(frozen=True)
class Span:
    """A stretch of time on one lane: an attempt, or a time the run was held."""

    lane: Literal["attempt", "hold"]
    kind: str
    start: datetime
    end: datetime
    label: str
    still_going: bool = False


@dataclass(frozen=True)
class Moment:
    """A point in time: a restart (its cause), a done check, a lease end, a person's act."""

    at: datetime
    kind: str
    label: str


@dataclass(frozen=True)
class Timeline:
    start: datetime
    end: datetime
    spans: list[Span]
    moments: list[Moment]


def build(
    status: RunStatus, marks: list[Mark], now: datetime, ended_at: datetime | None = None
) -> Timeline:
    """The run's timeline up to `ended_at` (a closed run), else `now`."""
    end = ended_at or now
    if status.state in ENDED and ended_at is None:
        end = max([status.started_at, *(_known_times(status, marks))])
    end = max(end, status.started_at)
    marks = sorted((m for m in marks if m.at <= end), key=lambda m: m.at)
    spans = _attempts(status, end) + _holds(status, marks, end)
    moments = _restarts(status) + _done_checks(status, marks) + _marked_moments(marks)
    moments = sorted((m for m in moments if status.started_at <= m.at <= end), key=lambda m: m.at)
    return Timeline(start=status.started_at, end=end, spans=spans, moments=moments)


def _known_times(status: RunStatus, marks: list[Mark]) -> list[datetime]:
    times = [m.at for m in marks] + [r.at for r in status.restarts]
    times += [c.at for c in status.done_checks]
    if status.last_progress_at is not None:
        times.append(status.last_progress_at)
    if status.last_words is not None:
        times.append(status.last_words.at)
    return times


def _attempts(status: RunStatus, end: datetime) -> list[Span]:
    """One span per attempt: from the run's start or the restart that began it to the restart
    that ended it (or the end)."""
    restarts = sorted(status.restarts, key=lambda r: r.at)
    spans: list[Span] = []
    begin = status.started_at
    for record in restarts:
        spans.append(
            Span(
                "attempt", "attempt", begin, record.at, f"attempt {record.attempt}: {record.reason}"
            )
        )
        begin = record.at
    going = status.state not in ENDED
    label = f"attempt {status.attempt}" + ("" if going else f": {status.state}")
    spans.append(Span("attempt", "attempt", begin, max(begin, end), label, still_going=going))
    return spans


def hold_kind(reason: str) -> HoldKind | None:
    """What a sandbox pause was for, from its reason (None: a sandbox set aside or ended)."""
    for prefix, kind in _HOLD_PREFIXES:
        if reason.startswith(prefix):
            return kind
    return None


def _holds(status: RunStatus, marks: list[Mark], end: datetime) -> list[Span]:
    """The times the run was held: each pause for a question, a wait or a person from the
    history, up to the wake (or restart) after it; and what holds it now, from the status."""
    boundaries = sorted(r.at for r in status.restarts)
    spans: list[Span] = []
    open_hold: tuple[HoldKind, datetime, str] | None = None
    for mark in marks:
        if open_hold is not None and (
            mark.kind == "wake" or _restart_between(boundaries, open_hold[1], mark.at)
        ):
            kind, start, label = open_hold
            stop = mark.at if mark.kind == "wake" else _first_after(boundaries, start)
            spans.append(Span("hold", kind, start, stop, label))
            open_hold = None
        if mark.kind == "pause":
            found = hold_kind(mark.detail)
            if found is not None and open_hold is None:
                open_hold = (found, mark.at, mark.detail)
    now_held = _held_now(status, end)
    if open_hold is not None:
        kind, start, label = open_hold
        if _restart_between(boundaries, start, end):
            spans.append(Span("hold", kind, start, _first_after(boundaries, start), label))
        elif now_held is not None:
            spans.append(Span("hold", now_held.kind, start, end, now_held.label, True))
            now_held = None
        elif status.state not in ENDED:
            spans.append(Span("hold", kind, start, end, label, still_going=True))
        else:
            spans.append(Span("hold", kind, start, end, label))
    if now_held is not None:
        spans.append(now_held)
    return spans


def _held_now(status: RunStatus, end: datetime) -> Span | None:
    """What holds the run now, as the status says it (None: nothing)."""
    talk = status.talk
    if status.state == "waiting_for_answer" and talk is not None and talk.question:
        start = talk.asked_at or end
        return Span("hold", "question", min(start, end), end, f"question: {talk.question}", True)
    if status.state in ENDED:
        return None
    if talk is not None and talk.waiting_until is not None:
        why = f": {talk.waiting_reason}" if talk.waiting_reason else ""
        until = f"{talk.waiting_until:%Y-%m-%d %H:%M} UTC"
        start = talk.asked_at or end
        return Span("hold", "wait", min(start, end), end, f"paused until {until}{why}", True)
    if status.state == "needs_attention":
        why = status.attention_reason or "needs attention"
        return Span("hold", "attention", end, end, f"needs attention: {why}", True)
    return None


def _restart_between(boundaries: list[datetime], start: datetime, stop: datetime) -> bool:
    return any(start < at <= stop for at in boundaries)


def _first_after(boundaries: list[datetime], start: datetime) -> datetime:
    return next(at for at in boundaries if at > start)


def _restarts(status: RunStatus) -> list[Moment]:
    return [
        Moment(r.at, "restart", f"restart after attempt {r.attempt}: {r.reason}")
        for r in status.restarts
    ]


def _done_checks(status: RunStatus, marks: list[Mark]) -> list[Moment]:
    """The latest round's checks with their verdicts (the status), and the earlier rounds'
    starts (the history; their verdicts are not kept)."""
    moments = []
    for check in status.done_checks:
        if check.passed:
            verdict = "passed"
        elif check.timed_out:
            verdict = "timed out"
        elif check.exit_code is not None:
            verdict = f"failed (exit {check.exit_code})"
        else:
            verdict = f"failed: {check.problem}" if check.problem else "failed"
        kind = "done_pass" if check.passed else "done_fail"
        label = f"done check, round {check.round}: {check.command} {verdict}"
        moments.append(Moment(check.at, kind, label))
    # A check's `at` is its end: the round began its run time before.
    first = min((c.at - timedelta(seconds=c.seconds) for c in status.done_checks), default=None)
    for mark in marks:
        if mark.kind == "done_check" and (first is None or mark.at < first):
            moments.append(Moment(mark.at, "done_check", mark.detail))
    return moments


_PERSON_LABELS = {
    "cancel": "cancelled",
    "extend": "budget extended",
    "answer": "answered",
    "rewind": "rewind asked",
}


def _marked_moments(marks: list[Mark]) -> list[Moment]:
    moments = []
    for mark in marks:
        if mark.kind == "wake" and mark.detail.startswith(_LEASE_WAKE):
            moments.append(Moment(mark.at, "lease_end", "lease ended; the sandbox was woken"))
        elif mark.kind in _PERSON_LABELS:
            said = f": {mark.detail}" if mark.detail else ""
            moments.append(Moment(mark.at, mark.kind, f"{_PERSON_LABELS[mark.kind]}{said}"))
    return moments
