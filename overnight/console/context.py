"""What every page of the console reads: the Temporal client, the settings and the shared runs
source. One `ConsoleContext` a process, on `app.state.console`; a page gets it with
`console_of(request)`."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from starlette.requests import HTTPConnection
from temporalio.client import Client

from overnight.console.limits import ReaderStreams
from overnight.console.runs_source import RunsSource
from overnight.console.settings import ConsoleSettings
from overnight.console.sign_in_limit import SignInLimiter


@dataclass
class ConsoleContext:
    client: Client
    settings: ConsoleSettings
    # The one shared poller of the runs list for every browser; the app runs it while it
    # serves (None: a context for a test that reads no list).
    runs: RunsSource | None = None
    # Set when the server is stopping: live streams end on it (else they would hold the
    # server's shutdown until its grace runs out).
    stopping: asyncio.Event = field(default_factory=asyncio.Event)
    # The wrong tokens of the last minutes (overnight/console/sign_in_limit.py).
    sign_ins: SignInLimiter = field(default_factory=SignInLimiter)
    # The event streams each reader holds (overnight/console/limits.py).
    streams: ReaderStreams = field(default_factory=ReaderStreams)


def console_of(request: HTTPConnection) -> ConsoleContext:
    context: ConsoleContext = request.app.state.console
    return context


def context_for(client: Client, settings: ConsoleSettings) -> ConsoleContext:
    """The context `overnight console` (and the tests) serve: the client, the settings, and the
    runs source every browser shares."""
    return ConsoleContext(client, settings, RunsSource(client))
