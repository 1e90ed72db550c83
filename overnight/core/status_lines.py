"""Status lines that the Web UI's card and `overnight status` print alike. Pure."""

from __future__ import annotations

from datetime import datetime

from overnight.core.agent_text import one_line
from overnight.core.done_check import shown_command
from overnight.core.models import RunStatus
from overnight.core.run_costs import SafetyNet

# What an output of the agent's `finish()` is shown under: `output <name>`, so that no name
# can take the place of one of the labels the card and `overnight status` show (and names
# that are such a label are refused: overnight.core.agent_requests.RESERVED_OUTPUT_NAMES).
OUTPUT_LABEL = "output"

# Money under a cent is shown to this many places (a cheap run's spend is news, not `$0.00`).
_SMALL_USD_PLACES = 4


def usd(value: float) -> str:
    """Money as a person reads it, one rule everywhere (the card, `overnight status`, the
    console): cents (`$1,234.56`), and under a cent its first figures (`$0.0013`), or
    `<$0.0001` for less; nothing is `$0.00`."""
    if value == 0 or abs(value) >= 0.01:
        return f"${value:,.2f}"
    if abs(value) < 10**-_SMALL_USD_PLACES:
        return f"<${10**-_SMALL_USD_PLACES:.{_SMALL_USD_PLACES}f}"
    return f"${value:.{_SMALL_USD_PLACES}f}"


# The budget an attention reason says is used up, as its words begin (workflows/pure/budget.py,
# decide.py, overnight/core/done_check.py, overnight/core/ci_rounds.py), and the `overnight extend`
# option that adds to it.
_EXTEND_OPTIONS = (
    ("restart budget used up", "--restarts N"),
    ("hours budget used up", "--hours H"),
    ("spend budget used up", "--spend USD"),
    ("wait budget used up", "--wait-hours H"),
    ("done checks used up", "--done-checks N"),
    ("CI checks still failing after", "--ci-rounds N"),
)


def attention_fix(reason: str, run_id: str) -> str | None:
    """The command that lifts what holds a run in `needs_attention`, when a budget does
    (`overnight extend RUN --restarts N`); None for another reason."""
    for start, option in _EXTEND_OPTIONS:
        if reason.startswith(start):
            return f"overnight extend {run_id} {option}"
    return None


def needs_you_line(status: RunStatus) -> str | None:
    """Why the run needs a person, and the command that lifts it when there is one (the
    card, `overnight status` and `logs --follow` alike); None when it needs nobody."""
    reason = status.attention_reason
    if not reason:
        return None
    fix = attention_fix(reason, status.run_id)
    return f"{reason}; {fix}" if fix else reason


def money_line(status: RunStatus) -> str | None:
    """The provider's figures beside the estimate, and the key's daily limit (the card and
    `overnight status` alike); None when the provider keeps no account."""
    parts = []
    if status.spend_charged_usd is not None:
        parts.append(
            f"{usd(status.spend_charged_usd)} by the provider "
            f"(estimate {usd(status.spend_estimated_usd)})"
        )
    daily = status.daily_limit
    if daily is not None:
        if daily.limit_usd is None:
            parts.append("no daily spending limit on the key")
        else:
            left = daily.remaining_usd if daily.remaining_usd is not None else 0.0
            parts.append(
                f"daily limit {usd(daily.limit_usd)}: {usd(daily.used_usd)} used, {usd(left)} left"
            )
    if status.waiting_for_daily_window:
        parts.append("waiting for the daily window to reopen")
    return " · ".join(parts) or None


def age(since: datetime | None, now: datetime) -> str:
    """`42s ago`, `7m ago`, `3h05m ago`; `never` for None (the card and the CLI alike)."""
    if since is None:
        return "never"
    seconds = max(0, int((now - since).total_seconds()))
    if seconds < 60:
        return f"{seconds}s ago"
    if seconds < 3600:
        return f"{seconds // 60}m ago"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m ago"


def moment(at: datetime | None, now: datetime, *, live: bool = True) -> str:
    """When something happened: its age while the text is live (`42s ago`), its time of day
    on a text written once and read later (a finished run's card: `17:58:02 UTC`, not an age
    that stays `1s ago` forever)."""
    if live or at is None:
        return age(at, now)
    return f"{at:%H:%M:%S} UTC"


def snapshot_line(status: RunStatus, now: datetime, *, live: bool = True) -> str | None:
    """The latest snapshot and its age (its time, not `live`), what captures cost in pauses,
    and failures (the card and `overnight status` alike); None when the run never tried one."""
    latest = status.latest_snapshot
    if latest is None and not status.snapshot_failures:
        return None
    parts = []
    if latest is not None:
        size = "" if latest.size_bytes is None else f", {latest.size_bytes / 2**20:.1f} MiB"
        parts.append(
            f"`{latest.snapshot_id}` ({latest.mode}{size}) taken "
            f"{moment(latest.taken_at, now, live=live)}"
        )
    else:
        parts.append("none ready")
    parts.append(f"{status.snapshots_taken} taken, paused {status.snapshot_pause_seconds:.1f} s")
    if status.snapshot_failures:
        parts.append(f"{status.snapshot_failures} failed (last: {status.snapshot_error or '-'})")
    if status.restored_from:
        parts.append(f"sandbox made from `{status.restored_from}`")
    return " · ".join(parts)


def talk_lines(status: RunStatus) -> list[tuple[str, str]]:
    """What the agent asks, waits for, spent on its model and handed over, as (label, text)
    lines (the card and `overnight status` alike). The texts are agent text on one line: each
    sink escapes it its own way (overnight.core.agent_text)."""
    lines: list[tuple[str, str]] = []
    said = status.talk
    if said is not None and said.question:
        choices = f" (one of: {', '.join(map(_one_line, said.choices))})" if said.choices else ""
        lines.append(("question", _one_line(said.question) + choices))
    if said is not None and said.waiting_until is not None:
        why = f": {_one_line(said.waiting_reason)}" if said.waiting_reason else ""
        lines.append(("paused until", f"{said.waiting_until:%Y-%m-%d %H:%M} UTC{why}"))
    if status.spend_model_usd:
        counted = "counted at the gateway, " if status.spend_model_source == "gateway" else ""
        lines.append(
            ("model spend", f"{usd(status.spend_model_usd)} ({counted}in the spend above)")
        )
    if status.spend_model_reported_usd is not None:
        lines.append(
            ("agent's own count", f"{usd(status.spend_model_reported_usd)} of model spend")
        )
    if status.model_api:
        lines.append(("model API", status.model_api.removeprefix("model API: ")))
    if status.model_calls_capped:
        lines.append(("model calls refused", f"{status.model_calls_capped} at the spend cap"))
    if said is not None and said.refused:
        lines.append(("kit request refused", said.refused))
    outputs = status.outputs
    if outputs is not None:
        if outputs.summary:
            lines.append(("result", _one_line(outputs.summary)))
        lines += [
            (f"{OUTPUT_LABEL} {name}", _one_line(value)) for name, value in outputs.values.items()
        ]
    return lines


_one_line = one_line


def safety_net_line(net: SafetyNet | None) -> str | None:
    """What the run's restarts cost and their share of its sandbox cost (the card, `overnight
    status` and the result alike); None before the first restart or for runs begun before."""
    if net is None or not net.restarts:
        return None
    share = "" if net.share is None else f" ({net.share:.1%} of the sandbox cost)"
    causes = ", ".join(
        f"{n} {cause.replace('_', ' ')}" for cause, n in sorted(net.by_cause.items())
    )
    return (
        f"${net.usd:.4f}{share}: {net.restarts} restart(s) ({causes}), "
        f"{net.lost_seconds:.0f} s of work lost, {net.setup_seconds:.0f} s of setup"
    )


def done_check_line(status: RunStatus) -> str | None:
    """The latest round of the done check (`done_when`), in one line (None: none ran)."""
    checks = status.done_checks
    if not checks:
        return None
    used = f"{status.done_checks_used} of {status.budget.max_done_checks} failed rounds used"
    failed = next((check for check in checks if not check.passed), None)
    round_number = checks[0].round
    if failed is None:
        seconds = sum(check.seconds for check in checks)
        return f"round {round_number}: {len(checks)} passed ({seconds:.1f} s) · {used}"
    how = (
        failed.problem
        if failed.problem
        else f"timed out after {failed.seconds:.0f} s"
        if failed.timed_out
        else f"exit {failed.exit_code}"
        if failed.exit_code is not None
        else "no exit code"
    )
    passed = len(checks) - 1
    after = f" after {passed} passed" if passed else ""
    return f"round {round_number}: {shown_command(failed.command)} failed ({how}){after} · {used}"


def done_check_block(status: RunStatus, lines: int) -> str | None:
    """The latest round's output: the failed check's tail, or each passed one's (the last
    `lines` lines, each check's under its command)."""
    checks = status.done_checks
    failed = [check for check in checks if not check.passed]
    shown = failed[-1:] or checks
    text: list[str] = []
    for check in shown:
        text.append(f"$ {one_line(check.command)}")
        text += check.tail.splitlines()
    return "\n".join(text[-lines:]) if text else None
