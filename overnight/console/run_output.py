"""The run's output live on its page: what `overnight logs --follow` reads (the agent's lines
across attempts and fresh-context starts, a header line for each, until the run ends), followed
by the same code (overnight/cli/logs_follow.py), its lines kept here for the page's events.

Like the command, it reads the run's sandboxes from this machine through the configured
providers (local sandboxes under `OVERNIGHT_HOME`; Runtime's with `RUNTIME_API_KEY`), with
each value of the run's `secret_env` found in this process's environment redacted, and every
control character shown as its escape (overnight.core.agent_text.terminal_safe). The page's
template escapes the rest: a line is text, never HTML.
"""

from __future__ import annotations

import asyncio
import os
from collections import deque
from collections.abc import Callable

from temporalio.client import Client

from activities.providers.protocol import SandboxProvider
from activities.providers.registry import open_configured
from overnight.cli import logs_follow
from overnight.cli.logs import Printer
from overnight.cli.run_view import load_run, query_status
from overnight.core.agent_text import terminal_line, terminal_safe
from overnight.core.errors import OvernightError
from overnight.core.output_tail import secret_values

# The lines one page's stream keeps (a page holds these and what came since).
KEPT_LINES = 1000
# What a page shows of one line: an agent's line can be of any length (one write of a
# megabyte with no newline), and every open page would hold and send it whole.
MAX_LINE_CHARS = 4000


class OutputLines:
    """Where the follower's printer writes: whole lines, numbered from 1, the last
    `KEPT_LINES` kept; `changed` is set when lines came."""

    def __init__(self, kept: int = KEPT_LINES) -> None:
        self.lines: deque[tuple[int, str]] = deque(maxlen=kept)
        self.count = 0
        self.changed = asyncio.Event()
        self.ended = False
        self._partial = ""

    def write(self, text: str, /) -> int:
        parts = (self._partial + text).split("\n")
        self._partial = parts.pop()
        if len(self._partial) > MAX_LINE_CHARS:
            self._partial = clipped(self._partial)
        for line in parts:
            self.count += 1
            self.lines.append((self.count, clipped(line)))
        return len(text)

    def flush(self) -> None:
        self.changed.set()

    def since(self, number: int) -> list[tuple[int, str]]:
        """The kept lines numbered after `number`."""
        return [(n, line) for n, line in self.lines if n > number]


def clipped(line: str) -> str:
    """`line` up to `MAX_LINE_CHARS`, and how much more there was (`overnight logs` shows it)."""
    if len(line) <= MAX_LINE_CHARS:
        return line
    return f"{line[:MAX_LINE_CHARS]} … ({len(line) - MAX_LINE_CHARS:,} more characters)"


def _lookup(providers: dict[str, SandboxProvider]) -> Callable[[str], SandboxProvider]:
    def lookup(name: str) -> SandboxProvider:
        found = providers.get(name)
        if found is None:
            raise OvernightError(
                f"this run's sandboxes are on provider {name!r}, which this console cannot "
                "read (set RUNTIME_API_KEY in its environment)"
            )
        return found

    return lookup


async def follow_output(client: Client, run_id: str, out: OutputLines) -> None:
    """Follow the run's output into `out` from its latest attempt's first line until the
    run ends (then an end line); a line saying why when it cannot be read here."""
    try:
        async with open_configured() as providers:
            lookup = _lookup(providers)
            view = await load_run(client, run_id, lookup)
            provider = lookup(view.spec.provider)
            secrets = secret_values(view.spec.secret_env, os.environ)
            printer = Printer(secrets, out, escape=terminal_safe)

            async def reload() -> None:
                view.status = await query_status(client, view.run_id) or view.status

            start = view.latest() or 1
            ended, reason = await logs_follow.follow(client, view, provider, start, printer, reload)
            told = f"{ended}: {reason}" if reason else ended
            printer.event("end", terminal_line(f"=== run {run_id} ended: {told} ==="))
    except OvernightError as err:
        out.write(terminal_line(f"[the output cannot be read here: {err}]") + "\n")
    except Exception as err:  # a provider's trouble: said on the page, the page goes on
        out.write(terminal_line(f"[reading the output failed: {err}]") + "\n")
    out.ended = True
    out.flush()
