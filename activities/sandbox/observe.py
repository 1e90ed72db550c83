"""The observe activity's long poll: watch the agent through the provider until there is news.

News the workflow hears at once: the agent ended, its sandbox stopped running (paused at its
lease end, stopped, gone). A changed checkpoint is news too, but it is handed over at most once
per `report_every_seconds` (the run's `poll_seconds`, the seed's cadence): an agent that
checkpoints every few seconds then costs one activity, one download and a few history events
a minute, not one per write. Held news is never lost: it goes out with whatever ends the poll.
The agent kit's requests file beside the checkpoint (`requests_path`, for runs that read it)
is watched and read the same way, each file only when the watch saw it written. What the
worker's gateway booked to the run's model calls (`model_books_of`) is read once per
`report_every_seconds` too, and is news when it grew: the budget counts it, and an agent that
calls its model from its own code writes no checkpoint to wake the poll.
"""

from __future__ import annotations

import time

from activities.models import (
    CheckpointRead,
    GatewayBooks,
    Observation,
    ObserveInput,
    RequestsRead,
)
from activities.providers.protocol import (
    CountsRefusals,
    SandboxProvider,
    ServesModels,
    Sighting,
    WatchRequest,
)
from activities.sandbox import requests_file
from activities.sandbox_base.checkpoints import changed, read_checkpoint
from overnight.core import metrics


async def observe(
    provider: SandboxProvider, input: ObserveInput, wait_seconds: float
) -> Observation:
    started = time.monotonic()
    give_up = started + wait_seconds
    report_at = started + input.report_every_seconds
    token = input.watch_token
    # The checkpoint (the requests file) was written since the last read: read it once, when
    # news is due.
    dirty = asked = False
    news: CheckpointRead | None = None
    requests: RequestsRead | None = None
    books = _BooksWatch(provider, input, started)
    while True:
        now = time.monotonic()
        held = dirty or asked
        until = give_up if not held else min(give_up, max(now, report_at))
        until = books.bounded(until, now)
        seen = await provider.watch(
            WatchRequest(
                input.sandbox_id,
                input.process_id,
                input.checkpoint_path,
                token=token,
                wait_seconds=max(0.0, until - now),
                report_touch=not held,
                requests_path=input.requests_path,
            )
        )
        token = seen.token
        dirty = dirty or seen.checkpoint_touched
        asked = asked or seen.requests_touched
        running = seen.sandbox.state == "running"
        ended = not running and seen.sandbox.state != "starting"
        agent_done = seen.process.state != "running"
        now = time.monotonic()
        due = ended or agent_done or now >= give_up
        # An agent that ended may have written its last checkpoint just before: the watch
        # says so (its write comes before its exit), and only then is it read. Nothing is
        # downloaded that the watch did not see written (a new watch stats it first).
        if running and dirty and (due or now >= report_at):
            known = news.digest if news is not None else input.known_digest
            read = await read_checkpoint(
                provider,
                input.sandbox_id,
                input.checkpoint_path,
                input.max_checkpoint_bytes,
                known,
                seen_running=True,
                secret_env=input.secret_env,
            )
            dirty = False
            if changed(read, known):
                news = read
        if running and asked and (due or now >= report_at):
            requests = await _read_requests(provider, input, requests) or requests
            asked = False
        grew = await books.grew(now) if running else False
        if due or grew or news is not None or requests is not None:
            if agent_done:
                _exit_noticed(seen)
            found = _observation(seen, news, token, requests)
            if isinstance(provider, CountsRefusals):
                found.egress_refused = await provider.egress_refusals(input.sandbox_id)
            found.gateway_books = await books.read()
            return found


async def _read_requests(
    provider: SandboxProvider, input: ObserveInput, news: RequestsRead | None
) -> RequestsRead | None:
    """The requests file when it changed since the last version seen (None: it did not)."""
    assert input.requests_path is not None
    known = news.digest if news is not None else input.known_requests_digest
    read = await requests_file.read_requests(
        provider,
        input.sandbox_id,
        input.requests_path,
        known,
        seen_running=True,
        secret_env=input.secret_env,
    )
    return read if requests_file.changed(read, known) else None


class _BooksWatch:
    """The gateway's books of the run, looked at once per `report_every_seconds` (at least
    once a second) while the agent runs; news when they grew past what the run knows."""

    def __init__(self, provider: SandboxProvider, input: ObserveInput, started: float) -> None:
        self.provider = provider if isinstance(provider, ServesModels) else None
        self.run_id = input.model_books_of
        self.known = input.known_model_books
        self.every = max(1.0, input.report_every_seconds)
        self.next_at = started + self.every

    @property
    def watched(self) -> bool:
        return self.provider is not None and self.run_id is not None

    def bounded(self, until: float, now: float) -> float:
        return min(until, max(now, self.next_at)) if self.watched else until

    async def grew(self, now: float) -> bool:
        if not self.watched or now < self.next_at:
            return False
        self.next_at = now + self.every
        books = await self.read()
        return books is not None and books.news_beside(self.known)

    async def read(self) -> GatewayBooks | None:
        if self.provider is None or self.run_id is None:
            return None
        return await self.provider.model_books(self.run_id)


def _exit_noticed(seen: Sighting) -> None:
    """Record how long the agent's exit took to be noticed (when its provider tells when)."""
    process = seen.process
    if process.ended_at is None or process.state not in ("exited", "killed"):
        return
    exit_class = "zero" if process.exit_code == 0 else "nonzero"
    if process.state == "killed":
        exit_class = "killed"
    waited = max(0.0, time.time() - process.ended_at)
    metrics.observe_in_activity(metrics.EXIT_NOTICED, {"exit": exit_class}, waited)


def _observation(
    seen: Sighting, news: CheckpointRead | None, token: str | None, requests: RequestsRead | None
) -> Observation:
    return Observation(
        process_state=seen.process.state,
        exit_code=seen.process.exit_code,
        sandbox_state=seen.sandbox.state,
        stop_reason=seen.sandbox.stop_reason,
        pause_reason=seen.sandbox.pause_reason if seen.sandbox.state == "paused" else None,
        lease_ends_at=seen.sandbox.lease_ends_at,
        checkpoint=news,
        watch_token=token,
        requests=requests,
    )
