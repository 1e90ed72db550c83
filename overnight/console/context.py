"""What every page of the console reads: the Temporal client, the settings and the shared runs
source. One `ConsoleContext` a process, on `app.state.console`; a page gets it with
`console_of(request)`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from starlette.requests import HTTPConnection
from temporalio.client import Client

from overnight.console.settings import ConsoleSettings


@dataclass
class ConsoleContext:
    client: Client
    settings: ConsoleSettings
    # The one shared poller of the visibility list (overnight.console.runs_source.RunsSource);
    # None until it is built. An async context manager: the app enters it at startup.
    runs: Any = None


def console_of(request: HTTPConnection) -> ConsoleContext:
    context: ConsoleContext = request.app.state.console
    return context


def context_for(client: Client, settings: ConsoleSettings) -> ConsoleContext:
    """The context `overnight console` (and the tests) serve: the client, the settings, and the
    runs source every browser shares."""
    return ConsoleContext(client, settings)
