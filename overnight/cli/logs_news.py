"""What `overnight logs --follow` says of the run itself, between its agent's lines: that it
needs a person and why, that its agent waits for an answer and the question, that it is
paused and until when, queued, running again. Before, a follower said nothing while a run sat
in `needs_attention` (issue 51): the agent prints nothing then, and the follower only looked
at the run for a new attempt or its end.

`news` is pure: the lines a change of the `status` query's answer is worth (none for what the
attempt headers and agent lines already say: a start, a restart, a fresh context). `watch`
asks the query every second beside the follower and prints them as they come (the printer
writes whole lines, so they fall between the agent's lines, never inside one). Every line
is one line of a terminal: the agent's words in it (its question, its choices, why it waits)
are folded and escaped (overnight.core.agent_text.terminal_line).
"""

from __future__ import annotations

import asyncio

from temporalio.client import Client

from overnight.cli.logs import Printer
from overnight.cli.logs_follow import Reads
from overnight.cli.run_view import RunView, query_status
from overnight.core.agent_text import terminal_line
from overnight.core.models import RunStatus
from overnight.core.status_lines import needs_you_line

WATCH_EVERY_SECONDS = 1.0
# The end line says these (`=== run R ended: ... ===`).
_ENDED = frozenset({"finished", "cancelled", "failed"})


def quiet(status: RunStatus) -> tuple[str, str] | None:
    """Why the run's agent is quiet, when something other than the agent holds it (a person,
    an answer, a pause, a place in the pool), as (state, line); None while it is the agent's
    to go on (starting, running, restarting, finishing: the attempt and agent lines say
    those) or the run has ended (the end line says that)."""
    run, talk = status.run_id, status.talk
    if status.state in _ENDED:
        return None
    if status.state == "needs_attention":
        why = needs_you_line(status) or f"see overnight status {run}"
        return "needs_attention", f"=== {run} needs you: {why} ==="
    if status.state == "waiting_for_answer" and talk is not None and talk.question:
        choices = f" (one of: {', '.join(talk.choices)})" if talk.choices else ""
        return "waiting_for_answer", (
            f"=== {run} waits for an answer: {talk.question}{choices}; "
            f"overnight answer {run} TEXT ==="
        )
    if talk is not None and talk.waiting_until is not None:
        why = f": {talk.waiting_reason}" if talk.waiting_reason else ""
        when = f"{talk.waiting_until:%Y-%m-%d %H:%M} UTC"
        return "paused", f"=== {run} is paused until {when}{why} ==="
    if status.waiting_for_daily_window:
        return "paused", f"=== {run} is paused until its provider key's daily window reopens ==="
    if status.state == "queued":
        return "queued", f"=== {run} is queued: it waits for a place among its pool's runs ==="
    return None


def news(before: RunStatus | None, now: RunStatus) -> list[tuple[str, str]]:
    """The (state, line) pairs worth printing when the status goes from `before` to `now`
    (`before` None: the follower's first look): what holds the run now, when that changed,
    and that it goes on once nothing does."""
    held, was = quiet(now), (quiet(before) if before is not None else None)
    if held is not None:
        return [] if held == was else [(held[0], terminal_line(held[1]))]
    if was is None or now.state in _ENDED or now.state == "finishing":
        return []  # an end (a cancel goes through finishing): the end line says it
    going = now.state.replace("_", " ")
    return [(now.state, terminal_line(f"=== {now.run_id} goes on: {going} ==="))]


async def watch(client: Client, view: RunView, printer: Printer, reads: Reads) -> None:
    """Print the run's news as it comes, until cancelled (the follower's end): each after
    the agent's output written before it (`reads`: a question after the lines leading to it)."""
    last: RunStatus | None = None
    while True:
        status = await query_status(client, view.run_id)
        if status is not None:
            told = news(last, status)
            if told:
                await reads.one_begun_now()
            for state, line in told:
                printer.event("state", line, state=state)
            last = view.status = status
        await asyncio.sleep(WATCH_EVERY_SECONDS)
