"""`overnight logs`: an agent's output, of one attempt or followed across all of them.

Output is read by cursor (see activities.providers.forensics): a reader, however slow,
never makes the agent wait. Lines are printed whole, each with every value of the run's
`secret_env` found in this process's environment replaced by `***` (the worker redacts
what it keeps; here only what this machine knows can be redacted), and the gateway's
credentials by their shape (a git URL's token, a URL's password). `--follow` carries on
across restarts and fresh-context starts, with a header line for each, and ends when the
run ends.
"""

from __future__ import annotations

import codecs
import json
import os
import sys
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from activities.providers.forensics import AgentProcess, OutputChunk, SandboxForensics
from activities.providers.protocol import SandboxProvider
from overnight.cli.render import terminal_safe
from overnight.cli.run_view import RunView, opened
from overnight.core.output_tail import (
    TAIL_BYTES,
    redact,
    redact_credential_shapes,
    secret_values,
    window_bytes,
)

# A followed agent's output is asked for with long polls this long (Runtime's own cap is 8 s).
FOLLOW_WAIT_SECONDS = 2.0
# How often a follower looks for a new attempt or the run's end.
LOOK_AROUND_SECONDS = 1.0
# `--tail N` reads about this much per line wanted from the end of each agent's output.
BYTES_PER_LINE = 512


class Out(Protocol):
    """Where a printer writes: a text stream (stdout, a string buffer, `--raw`'s)."""

    def write(self, text: str, /) -> int: ...

    def flush(self) -> None: ...


class Printer:
    """Whole lines, redacted, to `out`; as JSON events (one a line) with `json_lines`."""

    def __init__(
        self,
        secrets: list[str],
        out: Out,
        *,
        json_lines: bool = False,
        escape: Callable[[str], str] = terminal_safe,
    ) -> None:
        self.secrets = secrets
        self.out = out
        self.json_lines = json_lines
        # Each line as a person may see it (`--raw`: as the agent wrote it, for a program).
        self.escape = escape
        self._pending: dict[str, str] = {}
        self._decoders: dict[str, codecs.IncrementalDecoder] = {}

    def event(self, kind: str, text: str, **fields: Any) -> None:
        if self.json_lines:
            self._json({"type": kind, **fields, "text": text})
        else:
            self.out.write(self.escape(text + "\n"))
        self.out.flush()

    def output(self, attempt: int, process_id: str, data: bytes, *, final: bool = False) -> None:
        decoder = self._decoders.setdefault(
            process_id, codecs.getincrementaldecoder("utf-8")(errors="replace")
        )
        text = self._pending.pop(process_id, "") + decoder.decode(data, final=final)
        lines = text.split("\n")
        rest = lines.pop()
        if rest and not final:
            self._pending[process_id] = rest
        shown = [redact(line, self.secrets) for line in lines]
        if final and rest:
            # The output's last piece, perhaps cut off in the middle of a secret.
            shown.append(redact(rest, self.secrets, cut_end=True))
        # The gateway's tokens too, which this process may not know (git prints its remote).
        shown = [redact_credential_shapes(line) for line in shown]
        for line in shown:
            if self.json_lines:
                self._json(
                    {"type": "output", "attempt": attempt, "process_id": process_id, "text": line}
                )
            else:
                self.out.write(self.escape(line + "\n"))  # a CR before it is a line end
        self.out.flush()

    def _json(self, value: dict[str, Any]) -> None:
        self.out.write(json.dumps(value) + "\n")


def printer_for(view: RunView, *, json_lines: bool, raw: Out | None = None) -> Printer:
    """The run's printer to stdout; to `raw` as the agent wrote it (secrets still redacted)."""
    secrets = secret_values(view.spec.secret_env, os.environ)
    if raw is not None:
        return Printer(secrets, raw, json_lines=json_lines, escape=str)
    return Printer(secrets, sys.stdout, json_lines=json_lines)


def say(text: str) -> None:
    print(f"overnight: {text}", file=sys.stderr, flush=True)


def attempt_header(view: RunView, attempt: int) -> str:
    box = view.sandboxes[attempt]
    line = f"=== attempt {attempt} · sandbox {box.sandbox_id}"
    before = view.restart_reason(attempt - 1)
    if before:
        line += f" (attempt {attempt - 1} ended: {before})"
    return line + " ==="


def agent_header(agent: AgentProcess) -> str:
    return f"--- fresh-context start {agent.fresh_start} (process {agent.process_id}) ---"


def agent_footer(agent_state: str, exit_code: int | None) -> str:
    ended = f"exit {exit_code}" if exit_code is not None else agent_state
    return f"--- agent ended ({ended}) ---"


async def show_attempt(
    view: RunView, provider: SandboxProvider, attempt: int, p: Printer, *, tail: int | None
) -> None:
    """Everything the attempt's agents printed (or the last `tail` lines), then return."""
    async with opened(view, provider, attempt, say) as box:
        sid = box.sandbox.sandbox_id
        agents = await box.forensics.agents(sid)
        if tail is not None:
            await _show_tail(box.forensics, sid, agents, attempt, p, tail)
            return
        for agent in agents:
            if agent.fresh_start:
                p.event("agent", agent_header(agent), attempt=attempt, process_id=agent.process_id)
            await drain(box.forensics, sid, agent, attempt, p, 0, wait=0)


async def _show_tail(
    look: SandboxForensics,
    sid: str,
    agents: list[AgentProcess],
    attempt: int,
    p: Printer,
    lines: int,
) -> None:
    wanted = min(1024 * 1024, max(64 * 1024, lines * BYTES_PER_LINE))
    # Read a margin more, at least as long as the longest secret: a secret cut where the read
    # begins is still whole in it, so it is redacted, never shown in part.
    margin = window_bytes(p.secrets) - TAIL_BYTES
    kept: list[tuple[str, bytes]] = []
    count = 0
    for agent in reversed(agents):
        chunk = await look.output_tail(sid, agent.process_id, wanted + margin)
        data = chunk.data
        if chunk.next_cursor - len(data) > 0:
            data = _after_margin(data, p.secrets, margin)
            if b"\n" in data:
                data = data[data.index(b"\n") + 1 :]  # a piece of a line
        kept.insert(0, (agent.process_id, data))
        count += data.count(b"\n")
        if count >= lines:
            break
    text = b"".join(data for _, data in kept)
    chosen = text.split(b"\n")
    if chosen and chosen[-1] == b"":
        chosen.pop()
    shown = b"".join(line + b"\n" for line in chosen[-lines:])
    p.output(attempt, kept[-1][0] if kept else "", shown, final=True)


def _after_margin(data: bytes, secrets: list[str], margin: int) -> bytes:
    """What follows the first `margin` bytes of `data`, redacted with the margin in sight."""
    if len(data) <= margin:
        return b""
    text = data.decode("utf-8", errors="replace")
    start = len(data[:margin].decode("utf-8", errors="replace"))
    return redact(text, secrets, start=start).encode()


async def drain(
    look: SandboxForensics,
    sid: str,
    agent: AgentProcess,
    attempt: int,
    p: Printer,
    cursor: int,
    *,
    wait: float,
    recover: Callable[[int], Awaitable[bytes | None]] | None = None,
) -> OutputChunk:
    """Print what is there past `cursor` (waiting up to `wait` for more while it runs); the
    last read (its `state` is not "running" once the agent ended and all it wrote is out).
    `recover(n)`: the last `n` bytes of its output from elsewhere (the run's kept last words),
    for when the sandbox was deleted under a reader a moment behind."""
    while True:
        chunk = await look.read_output(sid, agent.process_id, cursor, wait_seconds=wait)
        if chunk.dropped:
            recovered = None if recover is None else await recover(chunk.dropped)
            if recovered:
                p.output(attempt, agent.process_id, recovered, final=False)
            else:
                p.event(
                    "dropped", f"[... {chunk.dropped} bytes no longer kept ...]", attempt=attempt
                )
        cursor = chunk.next_cursor
        ended = chunk.state != "running"
        p.output(attempt, agent.process_id, chunk.data, final=ended)
        if ended or not chunk.data or wait > 0:
            return chunk
