"""The gateway of this host: started by the worker, on the port of its `OVERNIGHT_HOME`
(`gateway/port`), kept across restarts so the relays of sandboxes made before a restart find
it again. Every gateway of the home listens on that one port (`SO_REUSEPORT`: the kernel
hands each connection to one of them), so a worker that stops, or one of several worker
processes of a host, takes no sandbox's way out with it while another serves; any of them
serves any sandbox of the home (its key and records are the home's).

A home's first gateway draws its port below the ports the kernel gives outgoing connections
(`ports.py`), so none of those can take it while every worker of the home is away.

It runs its own event loop in a thread of the process that starts it: the worker's activities
never wait on a connection it carries, and a worker's restart costs the sandboxes only the
connections open at that moment (their tools retry).

What it reads of sandboxes' records is records.py; its books, as the rest of overnight reads
and reaps them, books.py (both names still importable from here).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import logging
import os
import socket
import threading
from collections.abc import Sequence
from pathlib import Path

from activities.gateway.books import FOLDER as FOLDER
from activities.gateway.books import books_of as books_of
from activities.gateway.books import folder_of
from activities.gateway.books import model_stats_of as model_stats_of
from activities.gateway.books import refusals_of as refusals_of
from activities.gateway.books import spend_of as spend_of
from activities.gateway.git_http import ROUTE
from activities.gateway.model_ledger import ModelBook
from activities.gateway.model_routes import ROUTE as MODEL_ROUTE
from activities.gateway.model_routes import ModelRoutes
from activities.gateway.origin import Origin
from activities.gateway.ports import home_ports
from activities.gateway.proxy import Proxy, Settings
from activities.gateway.records import RecordReader
from activities.gateway.records import origin_of as origin_of
from activities.gateway.refused import RefusalBook
from activities.gateway.resolve import Resolver
from activities.gateway.tokens import (
    KEY_FILE,
    PROXY_USER_PREFIX,
    host_key,
    model_token_for,
    token_for,
)
from overnight.core.asyncio_servers import close_server
from overnight.core.egress import EGRESS_ADDRESSES_ENV, AddressRule, parse_address_rules
from overnight.core.home import overnight_home

logger = logging.getLogger(__name__)

PORT_FILE = "port"
PORT_LOCK = "port.lock"
PROBE_SECONDS = 1.0
FLUSH_SECONDS = 1.0
LOOPBACK = "127.0.0.1"
# Names a sandbox reaches directly, not through the gateway (its `host_ports` and itself).
NO_PROXY = "localhost,127.0.0.1,::1"


def port_of(home: Path) -> int | None:
    """The port this host's gateway serves on (None: it never started)."""
    try:
        return int((folder_of(home) / PORT_FILE).read_text().strip())
    except (OSError, ValueError):
        return None


def live_port(home: Path) -> int | None:
    """The port of a gateway serving this home now (one of its workers'); None when none
    listens: a sandbox made then gets no way out at all, rather than a dead one."""
    port = port_of(home)
    if port is None:
        return None
    try:
        with socket.create_connection((LOOPBACK, port), timeout=PROBE_SECONDS):
            return port
    except OSError:
        return None


def sandbox_env(home: Path, sandbox: str, port: int) -> dict[str, str]:
    """The environment that sends a sandbox's tools through the gateway as `sandbox`."""
    token = token_for(host_key(folder_of(home)), sandbox)
    url = f"http://{PROXY_USER_PREFIX}{sandbox}:{token}@{LOOPBACK}:{port}"
    env = {}
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        env[name] = env[name.lower()] = url
    env["NO_PROXY"] = env["no_proxy"] = NO_PROXY
    # Node's own fetch goes through them only when told (Node 24 and later).
    env["NODE_USE_ENV_PROXY"] = "1"
    return env


def redacted_tokens(sandbox: str, home: Path | None = None) -> list[str]:
    """The gateway token of `sandbox`, to redact from what a run keeps of its bytes (its
    checkpoint, requests, last words): a capability, kept out of history like a key. None when
    this host's gateway never made a key."""
    try:
        key = (folder_of(home or overnight_home()) / KEY_FILE).read_bytes()
    except OSError:
        return []
    return [token_for(key, sandbox), model_token_for(key, sandbox)]


def model_token(home: Path, sandbox: str) -> str:
    """The token `sandbox` sends to the gateway's model routes as its API key."""
    return model_token_for(host_key(folder_of(home)), sandbox)


def model_url(port: int) -> str:
    """The base URL of the gateway's model routes, as a sandbox reaches it (an Anthropic
    client's base URL; an OpenAI client's is this plus `/v1`)."""
    return f"http://{LOOPBACK}:{port}{MODEL_ROUTE.rstrip('/')}"


def git_remote(home: Path, sandbox: str, port: int, origin: Origin) -> str:
    """The URL at which the sandbox's git reaches its run's origin through the gateway."""
    token = token_for(host_key(folder_of(home)), sandbox)
    return f"http://{LOOPBACK}:{port}{ROUTE}{sandbox}/{token}/{origin.name}"


class Gateway:
    """The gateway's listener and its thread; `start` returns once it listens."""

    def __init__(
        self,
        home: Path,
        *,
        resolver: Resolver | None = None,
        address_rules: Sequence[AddressRule] | None = None,
    ) -> None:
        """`resolver` and `address_rules` replace the worker's settings (`OVERNIGHT_GATEWAY_HOSTS`,
        `OVERNIGHT_EGRESS_ADDRESSES`)."""
        self.home = home
        self.folder = folder_of(home)
        rules = address_rules
        if rules is None:
            rules = parse_address_rules(os.environ.get(EGRESS_ADDRESSES_ENV, ""))
        self.book = RefusalBook(self.folder)
        self.model_book = ModelBook(self.folder)
        key = host_key(self.folder)
        records = RecordReader(home)
        self.models = ModelRoutes(key, records.model_origin, self.model_book)
        self.proxy = Proxy(
            Settings(
                key=key,
                lookup=records.grant,
                origins=records.origin,
                book=self.book,
                resolver=resolver or Resolver(),
                address_rules=rules,
                models=self.models,
            )
        )
        self.port: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stop: asyncio.Event | None = None

    def start(self) -> int:
        # One at a time: two gateways of a home starting together share one port.
        with open(self.folder / PORT_LOCK, "ab") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            listening = listen_for_home(port_of(self.home))
            self.port = listening.getsockname()[1]
            if port_of(self.home) != self.port:
                temporary = self.folder / f"{PORT_FILE}.tmp"
                temporary.write_text(f"{self.port}\n")
                os.replace(temporary, self.folder / PORT_FILE)
        ready = threading.Event()
        self._thread = threading.Thread(
            target=self._serve, args=(listening, ready), name="overnight-gateway", daemon=True
        )
        self._thread.start()
        ready.wait()
        logger.info("gateway: sandboxes reach the network through 127.0.0.1:%s", self.port)
        return self.port

    def stop(self) -> None:
        """Stop listening (the home's other gateways go on serving its port); idempotent."""
        running = self._thread is not None and self._thread.is_alive()
        if running and self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.book.flush()
        self.model_book.flush()
        self.model_book.close()

    def _serve(self, listening: socket.socket, ready: threading.Event) -> None:
        asyncio.run(self._main(listening, ready))

    async def _main(self, listening: socket.socket, ready: threading.Event) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        server = await asyncio.start_server(self.proxy.handle, sock=listening, limit=64 * 1024)
        ready.set()
        try:
            while not self._stop.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), FLUSH_SECONDS)
                try:
                    self.book.flush()
                except OSError:
                    logger.exception("gateway: cannot write the book of refusals")
                try:
                    self.model_book.flush()
                except OSError:
                    logger.exception("gateway: cannot write the model routes' stats")
        finally:
            await close_server(server)
            await self.proxy.close()
            await self.models.close()


def listen_for_home(kept: int | None, drawn: Sequence[int] | None = None) -> socket.socket:
    """A listening socket on the home's port `kept`, beside the other gateways of the home
    there, else (none yet, or a program of another user's holds it) on the first unused of
    the ports `drawn` (default: drawn below the ports outgoing connections are given,
    ports.py), else on any."""
    tried = home_ports() if drawn is None else list(drawn)
    for port in ([kept] if kept else []) + tried + [0]:
        if port not in (kept, 0) and not _unused(port):
            continue  # a drawn port may be another home's gateway's: it would let us join
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        try:
            sock.bind((LOOPBACK, port))
        except OSError as error:
            sock.close()
            if error.errno != errno.EADDRINUSE:
                raise
            if port == kept:
                logger.warning("gateway: port %s is another program's; moving", port)
            continue
        sock.listen(512)
        sock.setblocking(False)
        return sock
    raise OSError("the gateway found no port to listen on")


def _unused(port: int) -> bool:
    """Nothing at all holds `port` on the loopback (a socket that may share it included)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((LOOPBACK, port))
        except OSError:
            return False
    return True
