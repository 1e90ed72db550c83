"""`overnight console`: the web console of the night's runs (docs/console.md), served by this
process under uvicorn on 127.0.0.1 unless told otherwise.

It connects as every command does (`overnight --address/--namespace`, Temporal's environment
configuration, TLS, API keys, `OVERNIGHT_CODEC_KEYS`: payloads are decoded here, never in the
browser). The settings (who may look and act) are checked before anything is dialled or bound.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import socket
from collections.abc import Awaitable, Callable
from dataclasses import replace

from temporalio.client import Client

from overnight.cli.commands import Command
from overnight.cli.connecting import connect
from overnight.console.settings import (
    DEFAULT_ADDRESS,
    DEFAULT_PORT,
    READ_TOKEN_ENV,
    TOKEN_ENV,
    ConsoleSettings,
    ConsoleSettingsError,
    settings_from_environment,
)
from overnight.core.local_services import Declared


def _arguments(console: argparse.ArgumentParser) -> None:
    console.add_argument(
        "--address",
        dest="listen_address",
        default=DEFAULT_ADDRESS,
        metavar="IP",
        help=f"address to listen on (default {DEFAULT_ADDRESS}: this machine only; any other "
        f"needs {TOKEN_ENV} or a trusted proxy)",
    )
    console.add_argument(
        "--port",
        dest="listen_port",
        type=int,
        metavar="PORT",
        default=DEFAULT_PORT,
        help=f"port to listen on (default {DEFAULT_PORT}; 0: any free port)",
    )


def settings_from_args(args: argparse.Namespace) -> ConsoleSettings:
    if args.listen_port == 0:  # any free port: the rest checked as for a real one
        return replace(settings_from_environment(args.listen_address, 1), port=0)
    return settings_from_environment(args.listen_address, args.listen_port)


def listen(settings: ConsoleSettings) -> socket.socket:
    try:
        family = socket.getaddrinfo(settings.address, settings.port, type=socket.SOCK_STREAM)
        return socket.create_server((settings.address, settings.port), family=family[0][0])
    except OSError as err:
        reason = err.strerror or str(err)
        raise ConsoleSettingsError(
            f"cannot listen on {settings.address}:{settings.port}: {reason} "
            "(choose another --port or --address)"
        ) from None


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/"


async def run(args: argparse.Namespace, connect: Callable[[], Awaitable[Client]]) -> int:
    """Serve until SIGINT or SIGTERM (a second one stops at once); exit 0."""
    from overnight.console.context import context_for
    from overnight.console.server import ConsoleServer

    settings = settings_from_args(args)  # a bad setting: one line, nothing dialled
    client = await connect()
    sock = listen(settings)
    server = ConsoleServer(context_for(client, settings))
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, server.stop)
    print(f"console at {url_of(sock)} (Ctrl-C stops)", flush=True)
    if settings.token_made_here:
        print(
            f"sign in with this token (made for this process; set {TOKEN_ENV} to choose "
            f"your own): {settings.operator_token}",
            flush=True,
        )
    with Declared("console"):
        await server.serve_on(sock)
    return 0


COMMANDS = (
    Command(
        "console",
        "serve the web console of your runs (a page to look and act; docs/console.md)",
        _arguments,
        lambda args: run(args, lambda: connect(args)),
        description="Serve the web console: every run, live; who needs you first; answer, "
        f"extend, cancel. Who may look and act: {TOKEN_ENV} (operator), {READ_TOKEN_ENV} "
        "(reader), or a signing-in proxy's header (docs/console.md).",
    ),
)
