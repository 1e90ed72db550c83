"""CI rounds (`pull_request.until_checks_pass`): the ground of them. Pure.

Once the run's pull request is open, overnight watches the check runs and commit statuses
GitHub reports on the pushed commit. A failure starts the agent again, in its own sandbox and
session, with the failing check's name and the tail of its log as the next prompt (written to
`overnight.core.done_check.DONE_CHECK_FILE`, the file a done check's failure is told by, with a
restart reason beginning `CI_CHECK_REASON`); the agent fixes it and ends again, its work is
pushed and watched again, within `Budget.max_ci_rounds`. Here: what the run shows of it
(`CiView`), what the agent is told, and what a person reads.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

# How the restart reason of an agent started again for a failing CI check begins (the agent
# kit and the coding-agent adapter read the failure's file when it does).
CI_CHECK_REASON = "CI check failed"
# How long the checks of a commit may stay pending (or unreported) before a person is asked.
# A first report is awaited this long: GitHub lists a check run as soon as CI queues it.
FIRST_REPORT_SECONDS = 15 * 60
# What of a failing check's log the agent is told (the adapter's prompt; the status keeps less).
TOLD_TAIL_CHARS = 6000
SHOWN_TAIL_CHARS = 1500

CiState = Literal["pending", "passed", "failing", "none"]


class FailingCheck(BaseModel):
    """A check that failed on the watched commit, as GitHub reported it."""

    model_config = ConfigDict(extra="forbid")

    name: str
    # "check_run" or "status"; its conclusion (or a status's state).
    kind: str = "check_run"
    conclusion: str = "failure"
    title: str = ""
    summary: str = ""
    log_tail: str = ""
    url: str = ""


class CiView(BaseModel):
    """What the status, the card and the result say of the run's CI rounds."""

    model_config = ConfigDict(extra="forbid")

    # The commit watched, and where its checks stand.
    commit: str | None = None
    state: CiState = "pending"
    # Times the agent was started again for a failing check (`Budget.max_ci_rounds`).
    rounds_used: int = 0
    max_rounds: int = 0
    # The check that failed last (its name and the tail of its log), and those pending now.
    failing: FailingCheck | None = None
    pending: list[str] = Field(default_factory=list)
    passed: list[str] = Field(default_factory=list)
    # GitHub API requests the watch made, and how many were answered from the ETag cache.
    polls: int = 0


def failing_line(check: FailingCheck) -> str:
    """One line naming a failing check: `tests (failure): 2 failed, 40 passed`."""
    said = check.title or next(iter(check.summary.strip().splitlines()), "")
    line = f"{check.name} ({check.conclusion})"
    return f"{line}: {said[:200]}" if said else line


def restart_reason(check: FailingCheck, round_number: int) -> str:
    """The restart reason of the agent started again for `check` (round `round_number`)."""
    return f"{CI_CHECK_REASON} (round {round_number}): {failing_line(check)}"


def told_text(check: FailingCheck, commit: str, others: list[str]) -> str:
    """What the agent started again finds in the failure's file: the check, its log's tail,
    and what to do. Written for a coding agent's next prompt and for a kit agent alike."""
    lines = [
        "(From overnight, which supervises this run.) Your work was pushed and its pull "
        f"request's CI ran on commit {commit[:12]}: the check `{check.name}` failed "
        f"({check.conclusion}), so the task is not finished yet. Fix what it reports, commit, "
        "then end your turn (an agent on the kit: exit 0); overnight pushes your work and "
        "watches CI again.",
        "",
        f"check: {check.name}",
    ]
    if check.title:
        lines.append(f"title: {check.title}")
    if check.summary:
        lines.append(f"summary: {check.summary}")
    if check.url:
        lines.append(f"details: {check.url}")
    if others:
        lines.append(f"also failing: {', '.join(others[:10])}")
    tail = check.log_tail[-TOLD_TAIL_CHARS:]
    if tail:
        lines += ["", "log (its end):", tail]
    return "\n".join(lines) + "\n"


def exhausted_reason(check: FailingCheck | None, used: int, most: int) -> str:
    """Why the run needs a person once its CI rounds are used up."""
    last = f": last, {failing_line(check)}" if check is not None else ""
    rounds = "round" if used == 1 else "rounds"
    return f"CI checks still failing after {used} {rounds} of {most} allowed{last}"


def still_pending_reason(commit: str, pending: list[str], hours: float) -> str:
    waiting = f" ({', '.join(pending[:5])})" if pending else ""
    return f"CI checks of {commit[:12]} still pending after {hours:g} h{waiting}"


def no_report_reason(commit: str) -> str:
    minutes = FIRST_REPORT_SECONDS // 60
    return (
        f"no CI check was reported on {commit[:12]} within {minutes} min: is CI set up for "
        "the pull request's branch?"
    )


def shown_tail(check: FailingCheck) -> FailingCheck:
    """The check as the status shows it: its log's tail cut shorter."""
    return check.model_copy(update={"log_tail": check.log_tail[-SHOWN_TAIL_CHARS:]})


def ci_line(view: CiView | None) -> str | None:
    """The run's CI in one line, for the card and `overnight status` (None: no CI watched)."""
    if view is None:
        return None
    rounds = f"round {view.rounds_used} of {view.max_rounds}"
    commit = f" on {view.commit[:12]}" if view.commit else ""
    if view.state == "failing" and view.failing is not None:
        return f"failing{commit} ({rounds}): {failing_line(view.failing)}"
    if view.state == "passed":
        return f"passed{commit} ({rounds}): {', '.join(view.passed[:5]) or 'all checks'}"
    if view.state == "none":
        return f"no check reported yet{commit} ({rounds})"
    if view.commit is None:
        return f"waits for the pull request ({rounds})"
    pending = f": {', '.join(view.pending[:5])}" if view.pending else ""
    return f"pending{commit} ({rounds}){pending}"
