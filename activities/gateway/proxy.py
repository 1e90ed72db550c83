"""The gateway's HTTP(S) proxy: `CONNECT host:port` for TLS (and anything else over TCP), and
plain `GET http://host/...` forwarded one request a connection.

Each request carries its sandbox's token (`Proxy-Authorization: Basic`, from the proxy URL
the sandbox was given). The host asked for must be on the sandbox's allow-list, and the
address it resolves to must be public or named by the worker; a refusal is an immediate 403
whose body says why, counted in the book. Bytes are carried as they come, never read.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import logging
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from activities.gateway import git_http
from activities.gateway.http_wire import parse_head
from activities.gateway.model_routes import ROUTE as MODEL_ROUTE
from activities.gateway.model_routes import ModelRoutes
from activities.gateway.origin import Origin
from activities.gateway.refused import RefusalBook
from activities.gateway.resolve import Address, Resolver
from activities.gateway.tokens import PROXY_USER_PREFIX, verify
from overnight.core.addresses import is_forbidden
from overnight.core.egress import AddressRule, EgressError, allows, normal_host, worker_allows

logger = logging.getLogger(__name__)

MAX_HEAD = 16 * 1024
HEAD_SECONDS = 30.0
CONNECT_SECONDS = 10.0
CLOSE_SECONDS = 5.0
CHUNK = 256 * 1024
HOP_HEADERS = {"proxy-authorization", "proxy-connection", "connection", "keep-alive"}


@dataclass(frozen=True)
class Grant:
    """What a running sandbox may reach: its allow-list (normal form; `*` every name)."""

    egress: tuple[str, ...]


# The gateway's view of a sandbox by name: its grant while it runs, else None.
SandboxLookup = Callable[[str], Grant | None]


class Refused(Exception):
    def __init__(self, status: int, reason: str, why: str, counted: str | None = None) -> None:
        super().__init__(why)
        self.status, self.reason, self.why, self.counted = status, reason, why, counted


@dataclass
class Settings:
    key: bytes
    lookup: SandboxLookup
    book: RefusalBook
    resolver: Resolver
    address_rules: Sequence[AddressRule] = ()
    # The origin a running sandbox's git is served (None: it has none here).
    origins: Callable[[str], Origin | None] = lambda name: None
    # The model routes (None: not served here).
    models: ModelRoutes | None = None


class Proxy:
    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self.connections = 0
        self._closing = False
        self._running: set[asyncio.Task[object]] = set()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        no_delay(writer)
        task = asyncio.current_task()
        if task is not None:
            self._running.add(task)
        try:
            if not self._closing:
                await self._handle(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, TimeoutError):
            pass
        except asyncio.CancelledError:
            if not self._closing:
                raise
            # Ended by `close`: a cancelled handler would be logged by asyncio's streams as
            # an error ("Exception in callback ..."), one per open connection.
        except Exception:  # one connection's fault never stops the gateway
            logger.exception("gateway: a connection failed")
        finally:
            self._running.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def close(self) -> None:
        """End every connection, those accepted as the listener closed included, before the
        loop ends. `asyncio.run` cancels the tasks it finds once: an accept's task cancelled
        before it ran leaves its socket unclosed, and a handler that starts after that is
        left pending on a closed loop. So the handlers that run are cancelled, and the rest
        (accepts, handlers not yet started: they see `_closing` and return) run out."""
        self._closing = True
        this = asyncio.current_task()
        while True:
            for _ in range(3):  # an accept's handler starts a few loop turns after it
                await asyncio.sleep(0)
            others = [task for task in asyncio.all_tasks() if task is not this]
            if not others:
                return
            for task in self._running:
                task.cancel()
            _, pending = await asyncio.wait(others, timeout=CLOSE_SECONDS)
            for task in pending:  # not one of ours, or deaf to its cancel: it ends now
                task.cancel()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_SECONDS)
        except asyncio.LimitOverrunError:
            await _answer(writer, 431, "Request Header Fields Too Large", "request head too long")
            return
        method, target, headers = parse_head(head)
        models = self._settings.models
        if target.startswith(MODEL_ROUTE) and models is not None:
            await models.serve(method, target, headers, reader, writer)
            return
        if target.startswith("/"):  # asked of the gateway itself, not through it
            await self._serve_git(method, target, headers, reader, writer)
            return
        sandbox = self._sandbox(headers)
        if sandbox is None:
            await _answer(
                writer,
                407,
                "Proxy Authentication Required",
                "overnight gateway: no valid token of a running sandbox",
                extra=[("Proxy-Authenticate", 'Basic realm="overnight"')],
            )
            return
        name, grant = sandbox
        try:
            if method == "CONNECT":
                host, port = _split_authority(target, default_port=443)
                upstream = await self._open(name, grant, host, port)
                writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
                await writer.drain()
                await _splice(reader, writer, *upstream)
                return
            url = urlsplit(target)
            if url.scheme != "http" or not url.hostname:
                raise Refused(400, "Bad Request", "overnight gateway: ask for http://host/...")
            host, port = url.hostname, url.port or 80
            upstream = await self._open(name, grant, host, port)
        except Refused as refused:
            if refused.counted is not None:
                self._settings.book.count(name, refused.counted)
            await _answer(writer, refused.status, refused.reason, refused.why)
            return
        path = url.path or "/"
        if url.query:
            path += "?" + url.query
        kept = [(k, v) for k, v in headers if k.lower() not in HOP_HEADERS]
        lines = [f"{method} {path} HTTP/1.1", *(f"{k}: {v}" for k, v in kept), "Connection: close"]
        upstream[1].write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        await _splice(reader, writer, *upstream)

    async def _serve_git(
        self,
        method: str,
        target: str,
        headers: list[tuple[str, str]],
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        """The sandbox's origin over smart HTTP (git_http.py), for its own token only: the
        token is in the path (`/git/<sandbox>/<token>/<name>/...`), so git never meets an
        authentication challenge (after one, git calls any failure of the origin's a
        failed authentication)."""
        found = git_http.token_in_path(target)
        name = None
        if found is not None and verify(self._settings.key, found[0], found[1]):
            name = found[0]
        origin = None if name is None else self._settings.origins(name)
        if name is None or origin is None:
            await _answer(
                writer,
                404,
                "Not Found",
                "overnight gateway: no valid token of a running sandbox with an origin here",
            )
            return
        assert found is not None
        try:
            await git_http.serve(origin, method, found[2], headers, reader, writer, name)
        except git_http.Answer as answer:
            await _answer(writer, answer.status, answer.reason, answer.text)

    def _sandbox(self, headers: list[tuple[str, str]]) -> tuple[str, Grant] | None:
        """The running sandbox whose valid token the proxy credentials (Basic) carry, and
        its grant."""
        for key, value in headers:
            if key.lower() != "proxy-authorization":
                continue
            scheme, _, encoded = value.strip().partition(" ")
            if scheme.lower() != "basic":
                return None
            try:
                user, _, token = base64.b64decode(encoded, validate=True).decode().partition(":")
            except (binascii.Error, UnicodeDecodeError):
                return None
            name = user.removeprefix(PROXY_USER_PREFIX)
            if user == name or not verify(self._settings.key, name, token):
                return None
            grant = self._settings.lookup(name)
            return None if grant is None else (name, grant)
        return None

    async def _open(
        self, sandbox: str, grant: Grant, asked: str, port: int
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        try:
            host = normal_host(asked)
        except EgressError:
            raise Refused(400, "Bad Request", f"overnight gateway: {asked!r} is no host") from None
        if not allows(grant.egress, host):
            raise Refused(
                403,
                "Forbidden",
                f"overnight gateway: {host} is not on this run's allow-list "
                "(RunSpec.egress; docs/security.md#the-network)",
                counted=host,
            )
        addresses = await self._settings.resolver.resolve(host, port)
        if not addresses:
            raise Refused(502, "Bad Gateway", f"overnight gateway: {host} has no address")
        usable, why = self._usable(addresses, port)
        if usable is None:
            raise Refused(
                403, "Forbidden", f"overnight gateway: {host} leads to {why}", counted=host
            )
        try:
            opened = await asyncio.wait_for(
                asyncio.open_connection(str(usable), port, limit=CHUNK), CONNECT_SECONDS
            )
        except (OSError, TimeoutError) as error:
            raise Refused(
                502, "Bad Gateway", f"overnight gateway: cannot reach {host}:{port} ({error})"
            ) from None
        no_delay(opened[1])
        return opened

    def _usable(self, addresses: list[Address], port: int) -> tuple[Address | None, str]:
        """The first address the rules let a sandbox reach, else why none."""
        why = ""
        for address in addresses:
            refusal = is_forbidden(address)
            if refusal is None or worker_allows(address, port, self._settings.address_rules):
                return address, ""
            why = why or f"{refusal}, which no sandbox may reach"
        return None, why


def _split_authority(target: str, *, default_port: int) -> tuple[str, int]:
    if target.startswith("["):
        host, _, rest = target[1:].partition("]")
        port_text = rest.removeprefix(":")
    else:
        host, _, port_text = target.rpartition(":") if ":" in target else (target, "", "")
    if not port_text:
        return host, default_port
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise Refused(400, "Bad Request", f"overnight gateway: {target!r} names no port")
    return host, int(port_text)


async def _answer(
    writer: asyncio.StreamWriter,
    status: int,
    reason: str,
    text: str,
    extra: Sequence[tuple[str, str]] = (),
) -> None:
    body = (text + "\n").encode()
    lines = [f"HTTP/1.1 {status} {reason}", "Content-Type: text/plain; charset=utf-8"]
    lines += [f"Content-Length: {len(body)}", "Connection: close", "X-Overnight-Gateway: refused"]
    lines += [f"{k}: {v}" for k, v in extra]
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
    await writer.drain()


async def _splice(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    up_reader: asyncio.StreamReader,
    up_writer: asyncio.StreamWriter,
) -> None:
    """Carry bytes both ways until either side closes."""

    async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        try:
            while chunk := await source.read(CHUNK):
                sink.write(chunk)
                await sink.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            with contextlib.suppress(Exception):
                if sink.can_write_eof():
                    sink.write_eof()

    try:
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
    finally:
        up_writer.close()
        with contextlib.suppress(Exception):
            await up_writer.wait_closed()


def no_delay(writer: asyncio.StreamWriter) -> None:
    """Send each write at once: a head and a body written apart would otherwise wait for the
    peer's delayed ACK (40 ms) between them."""
    with contextlib.suppress(OSError, AttributeError):
        writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
