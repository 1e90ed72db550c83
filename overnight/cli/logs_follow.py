"""`overnight logs --follow`: an agent's output as it writes, across restarts and fresh-context
starts, until the run ends (see overnight.cli.logs for how output is read and printed).

A followed Runtime sandbox is only read while it runs: before each read its state is asked
(which never wakes it), so a sandbox that pauses (at its lease end, or set aside after a crash)
is left alone, and the follower waits for the run to wake it, start the next attempt, or end.
A read can still meet a pause that came after its state was asked (Runtime then wakes the
sandbox): a sandbox the run has left that runs when the follower leaves it is paused again.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError, WorkflowHandle

from activities.providers.forensics import AgentProcess
from activities.providers.protocol import (
    ProviderError,
    SandboxNotFound,
    SandboxNotRunning,
    SandboxProvider,
)
from overnight.cli.logs import (
    FOLLOW_WAIT_SECONDS,
    LOOK_AROUND_SECONDS,
    Printer,
    agent_footer,
    agent_header,
    attempt_header,
    drain,
    say,
)
from overnight.cli.run_view import (
    CannotRead,
    Opened,
    RunView,
    opened,
    pause_again,
    refresh_sandboxes,
)


class Reads:
    """The follower's passes over its agents' output, so that the run's news (logs_news.py)
    can be printed after the output written before it: a question is asked after the lines
    that lead to it, but the news of it can come before the follower's next read."""

    # Attached: a pass ended this recently (else the follower waits for a paused sandbox or
    # a new attempt, and the news is not held).
    ATTACHED_SECONDS = FOLLOW_WAIT_SECONDS + 2 * LOOK_AROUND_SECONDS
    # The longest a piece of news waits for a pass.
    HOLD_SECONDS = 2 * FOLLOW_WAIT_SECONDS + LOOK_AROUND_SECONDS

    def __init__(self) -> None:
        self.begun = 0
        self.ended = 0
        self.ended_at = float("-inf")
        # About to read a running sandbox, its first pass not begun: news waits for it too
        # (seen in CI: a question printed before the lines leading to it, as the follower
        # opened the sandbox).
        self.attaching = False
        self._changed = asyncio.Event()  # a pass ended, or the follower let a sandbox be

    def attach(self) -> None:
        self.attaching = True

    def detach(self) -> None:
        self.attaching = False
        self._fire()

    def begin(self) -> None:
        self.begun += 1

    def end(self) -> None:
        self.ended = self.begun
        self.ended_at = time.monotonic()
        self.attaching = False
        self._fire()

    def _fire(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def _holds(self) -> bool:
        """News waits: a pass is under way or about to begin, or one ended moments ago."""
        reading = self.begun > self.ended or self.attaching
        return reading or time.monotonic() - self.ended_at <= self.ATTACHED_SECONDS

    async def one_begun_now(self) -> None:
        """Return once a pass that began after this call has ended (all written before it is
        printed), at once when the follower is not reading, and after HOLD_SECONDS at most."""
        wanted = self.begun + 1
        deadline = time.monotonic() + self.HOLD_SECONDS
        while self.ended < wanted and self._holds():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            try:
                await asyncio.wait_for(self._changed.wait(), left)
            except TimeoutError:
                return


async def follow(
    client: Client,
    view: RunView,
    provider: SandboxProvider,
    start: int,
    p: Printer,
    reload: Callable[[], Any],
    reads: Reads | None = None,
) -> tuple[str, str | None]:
    """Follow from attempt `start` on, until the run ends; returns how it ended, and why
    when it failed. `reads` counts its passes over the output (for the run's news)."""
    reads = reads or Reads()
    attempt = start
    announced: set[int] = set()
    while True:
        if attempt not in view.sandboxes:
            if not view.open:
                return await _ending(client, view)
            await asyncio.sleep(LOOK_AROUND_SECONDS / 2)
            await _look_around(client, view, provider, reload, attempt)
            continue
        if attempt not in announced:
            announced.add(attempt)
            p.event("attempt", attempt_header(view, attempt), attempt=attempt)
        reads.attach()  # before any await: the news watcher's first look waits for this read
        try:
            await _follow_attempt(client, view, provider, attempt, p, reload, reads)
        except CannotRead as why:
            say(str(why))
            tail = view.kept_tail(attempt)
            if tail:
                p.event("kept", "(its last words, as the run kept them:)", attempt=attempt)
                p.output(attempt, "kept", tail.encode(), final=True)
        finally:
            reads.detach()
        newer = [n for n in view.sandboxes if n > attempt]
        if newer:
            attempt = min(newer)
            continue
        if not view.open:
            return await _ending(client, view)
        await asyncio.sleep(LOOK_AROUND_SECONDS)
        await _look_around(client, view, provider, reload, attempt)


async def _follow_attempt(
    client: Client,
    view: RunView,
    provider: SandboxProvider,
    attempt: int,
    p: Printer,
    reload: Callable[[], Any],
    reads: Reads,
) -> None:
    """Print the attempt's agents as they write, until all ended, a newer attempt exists or
    the run ended. A sandbox woken for the read is read as it is, not followed."""
    async with opened(view, provider, attempt, say) as box:
        sid = box.sandbox.sandbox_id
        cursors: dict[str, int] = {}
        ended: set[str] = set()
        looked = time.monotonic()
        agents: list[AgentProcess] = []
        while True:
            state = await _state_now(provider, box)
            if state in ("stopped", "missing") and not agents:
                raise CannotRead(f"sandbox {sid} (attempt {attempt}) is {state}")
            if state != "running":
                # Paused (at its lease end, or set aside): a read would wake it. Wait for the
                # run to wake it, start a new attempt, or end.
                reads.detach()
                await asyncio.sleep(LOOK_AROUND_SECONDS)
                await _look_around(client, view, provider, reload, attempt)
                if any(n > attempt for n in view.sandboxes) or not view.open:
                    _not_read(view, agents, ended, attempt, p)
                    return
                continue
            reads.begin()
            try:
                agents = await box.forensics.agents(sid)
                for agent in agents:
                    if agent.process_id in ended:
                        continue
                    if agent.process_id not in cursors and agent.fresh_start:
                        p.event("agent", agent_header(agent), attempt=attempt)
                    running = agent is agents[-1] and not box.woken
                    chunk = await drain(
                        box.forensics,
                        sid,
                        agent,
                        attempt,
                        p,
                        cursors.get(agent.process_id, 0),
                        wait=FOLLOW_WAIT_SECONDS if running else 0,
                        recover=_kept_end(view, attempt, reload) if agent is agents[-1] else None,
                    )
                    cursors[agent.process_id] = chunk.next_cursor
                    if chunk.state != "running":
                        ended.add(agent.process_id)
                        footer = agent_footer(chunk.state, chunk.exit_code)
                        p.event("agent_end", footer, attempt=attempt, exit_code=chunk.exit_code)
            except (SandboxNotRunning, SandboxNotFound):
                # Stopped or paused since its state was asked: the top of the loop sees how.
                continue
            finally:
                reads.end()
            if box.woken:
                return
            if time.monotonic() - looked >= LOOK_AROUND_SECONDS or len(ended) == len(agents):
                looked = time.monotonic()
                await _look_around(client, view, provider, reload, attempt)
                if any(n > attempt for n in view.sandboxes) or not view.open:
                    running = await _state_now(provider, box) == "running"
                    if not (running and await _last_read(box, attempt, p, cursors, ended)):
                        _not_read(view, agents, ended, attempt, p)
                    await _pause_if_a_read_woke(provider, view, box, attempt)
                    return
                if len(ended) == len(agents):
                    await asyncio.sleep(LOOK_AROUND_SECONDS / 2)


async def _pause_if_a_read_woke(
    provider: SandboxProvider, view: RunView, box: Opened, attempt: int
) -> None:
    """Pause again a sandbox the run has left (set aside, or its run ended) that runs: the run
    paused it between the follower's look at its state and a read, and Runtime woke it for
    that read, with a fresh lease billed while it runs."""
    if not box.forensics.wakes_on_read or box.woken:
        return  # nothing wakes on a read, or `opened` pauses what it woke
    sid = box.sandbox.sandbox_id
    try:
        current = await provider.sandbox(sid)
    except ProviderError:
        return
    if current.state == "running" and view.may_wake(current):
        say(f"sandbox {sid} (attempt {attempt}) was woken by a read that met its pause")
        await pause_again(provider, sid, say)


def _kept_end(
    view: RunView, attempt: int, reload: Callable[[], Any]
) -> Callable[[int], Awaitable[bytes | None]]:
    """The last `n` bytes of the attempt's last agent's output, from the last words the run
    kept (a stopped sandbox is deleted at once: a follower a moment behind the run's end finds
    its output gone). None when the kept words do not reach back that far."""

    async def recover(n: int) -> bytes | None:
        await reload()
        tail = view.kept_tail(attempt)
        kept = (tail or "").encode()
        if len(kept) < n:
            return None
        return kept[len(kept) - n :]

    return recover


async def _state_now(provider: SandboxProvider, box: Opened) -> str:
    """The sandbox's state when reading it could wake it (Runtime), without waking it."""
    if not box.forensics.wakes_on_read or box.woken:
        return "running"
    return (await provider.sandbox(box.sandbox.sandbox_id)).state


def _not_read(
    view: RunView, agents: list[AgentProcess], ended: set[str], attempt: int, p: Printer
) -> None:
    if any(agent.process_id not in ended for agent in agents):
        p.event(
            "paused",
            "[the sandbox paused before its last output was read: "
            f"overnight logs {view.run_id} --attempt {attempt} wakes it to read the rest]",
            attempt=attempt,
        )


async def _last_read(
    box: Opened, attempt: int, p: Printer, cursors: dict[str, int], ended: set[str]
) -> bool:
    """What the attempt's agents wrote since the last read, now that it is over; False when
    the sandbox stopped running under the read."""
    look, sid = box.forensics, box.sandbox.sandbox_id
    try:
        for agent in await look.agents(sid):
            if agent.process_id in ended:
                continue
            start = cursors.get(agent.process_id, 0)
            await drain(look, sid, agent, attempt, p, start, wait=0)
            p.output(attempt, agent.process_id, b"", final=True)
    except (SandboxNotRunning, SandboxNotFound):
        return False
    return True


async def _look_around(
    client: Client,
    view: RunView,
    provider: SandboxProvider,
    reload: Callable[[], Any],
    attempt: int,
) -> None:
    """Refresh what the view knows: new sandboxes, whether the run is still open, and (at a
    new attempt, for its header) the restart reasons."""
    before = set(view.sandboxes)
    await refresh_sandboxes(view, provider)
    described = await client.get_workflow_handle(view.run_id).describe()
    view.open = described.status == WorkflowExecutionStatus.RUNNING
    if set(view.sandboxes) != before or not view.open:
        await reload()


async def _ending(client: Client, view: RunView) -> tuple[str, str | None]:
    """How the run ended, in a word or two (its state, and the workflow's when they differ),
    and why, when it failed or was cancelled."""
    handle = client.get_workflow_handle(view.run_id)
    described = await handle.describe()
    workflow = described.status.name.lower() if described.status is not None else "closed"
    why = await _failure(handle) if workflow == "failed" else None
    state = view.status.state if view.status is not None else None
    if state == "cancelled" and view.status is not None:
        why = why or view.status.cancel_reason  # a person's words, escaped with the line
    if state is None or workflow in ("terminated", "timed_out"):
        return workflow, why
    if workflow in ("completed", state):
        return state, why
    return f"{state} (workflow {workflow})", why


async def _failure(handle: WorkflowHandle[Any, Any]) -> str | None:
    """A failed run's one line: its failure's message (a run refused at its start has no
    status to say it)."""
    try:
        await handle.result()
    except WorkflowFailureError as err:
        cause = err.cause
        return getattr(cause, "message", None) or str(cause or err)
    except Exception:  # the result could not be read: the end line goes without a reason
        return None
    return None
