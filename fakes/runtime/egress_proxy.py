"""Runtime's egress proxy, as the fake's sandboxes reach it: where egress secrets go in.

What Runtime documents (`withruntime/runtime`, `packages/cloud-guide/docs/`):
- `sandbox-environment.md` "The network": a sandbox has no network card; everything outbound
  goes through a proxy on its host, and the image sets `HTTP_PROXY`, `HTTPS_PROXY` (and their
  lower-case forms) to it, `NO_PROXY=localhost,127.0.0.1,::1,10.0.0.0/8,172.16.0.0/12,
  192.168.0.0/16` and `NODE_USE_ENV_PROXY=1`.
- `security.md` "Secrets sandboxes never see": the proxy replaces a secret's placeholder with
  its value in the URL and headers of HTTPS requests to the secret's hosts, and nowhere else
  (with `header`, it sets that header on every HTTPS request to them); plain HTTP never
  carries a secret and request bodies are never rewritten; requests to a secret's hosts go
  over HTTP/1.1. To reach those hosts the proxy opens the HTTPS connection itself and checks
  the real server's certificate; sandboxes trust Runtime's certificate for them through
  `SSL_CERT_FILE`, `REQUESTS_CA_BUNDLE` and `NODE_EXTRA_CA_CERTS`.

The fake: one proxy on a loopback port of its own for every sandbox (they share the test
machine's network, so their variables name that port, not 10800), and
- `CONNECT` to a host no secret is bound to: a tunnel, the bytes untouched;
- `CONNECT` to a bound host: TLS ended here with a leaf of the fake's CA for that host, the
  request rewritten as above, and sent on over TLS checked against the fake's trust (the
  system's roots and the CAs a test adds: `FakeRuntime.trust`). One request a connection:
  `Connection: close` both ways, the answer streamed back as it comes;
- an `http://` request: sent on as it is;
- a name is looked up in the test's `internet` first (`FakeRuntime.reach`: its sandboxes'
  internet is the loopback), else resolved.
What it does not do: hold a connection to its sandbox's network rules (it cannot tell
sandboxes apart), refuse private addresses, count or bill traffic, take raw sockets (only
programs that use the proxy variables come here), or apply a secret's `rules`.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Callable
from urllib.parse import urlsplit

from fakes.runtime.egress_secrets import EgressSecret, EgressSecrets
from fakes.tls import CertAuthority
from overnight.core.asyncio_servers import close_server

MAX_HEAD_BYTES = 64 * 1024
CHUNK = 64 * 1024
NO_PROXY = "localhost,127.0.0.1,::1,10.0.0.0/8,172.16.0.0/12,192.168.0.0/16"
# Hop-by-hop headers the proxy sets itself.
_HOP = frozenset({"connection", "proxy-connection", "keep-alive", "proxy-authorization"})

Head = tuple[str, list[tuple[str, str]]]


def proxy_env(port: int) -> dict[str, str]:
    """The variables Runtime's image sets, naming this proxy."""
    url = f"http://127.0.0.1:{port}"
    names = ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy")
    return {name: url for name in names} | {
        "NO_PROXY": NO_PROXY,
        "no_proxy": NO_PROXY,
        "NODE_USE_ENV_PROXY": "1",
    }


class EgressProxy:
    """`internet`: name -> (address, port) where the test serves it; `trust`: the context
    upstream certificates are checked with (asked at each connection)."""

    def __init__(
        self,
        secrets: EgressSecrets,
        authority: CertAuthority,
        internet: dict[str, tuple[str, int]],
        trust: Callable[[], ssl.SSLContext],
    ) -> None:
        self.secrets = secrets
        self.authority = authority
        self.internet = internet
        self.trust = trust
        self.port = 0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def close(self) -> None:
        if self._server is not None:
            await close_server(self._server)
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            head = await read_head(reader)
            if head is not None:
                line, headers = head
                method, target, _ = line.split(" ", 2)
                if method == "CONNECT":
                    await self._connect(target, reader, writer)
                else:
                    await self._plain(line, headers, reader, writer)
        except (OSError, EOFError, ValueError, ssl.SSLError, asyncio.IncompleteReadError):
            pass  # a client or server gone, or bytes that are no HTTP: the connection ends
        except asyncio.CancelledError:
            pass  # the fake is closing
        finally:
            self._tasks.discard(task)
            writer.close()

    async def _open(
        self, host: str, port: int, tls: bool
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        address, port = self.internet.get(host.lower().rstrip("."), (host, port))
        if not tls:
            return await asyncio.open_connection(address, port)
        return await asyncio.open_connection(address, port, ssl=self.trust(), server_hostname=host)

    async def _connect(
        self, target: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        host, _, port_text = target.rpartition(":")
        host, port = host.strip("[]"), int(port_text)
        bound = self.secrets.bound_to(host)
        if not bound:
            try:
                up_reader, up_writer = await self._open(host, port, tls=False)
            except OSError:
                writer.write(_refusal(502, "the host could not be reached"))
                return
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            await _both_ways(reader, writer, up_reader, up_writer)
            return
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        await writer.drain()
        await writer.start_tls(self.authority.server_context(host))
        head = await read_head(reader)
        if head is None:
            return
        line, headers = rewritten(head, bound)
        try:
            up_reader, up_writer = await self._open(host, port, tls=True)
        except (OSError, ssl.SSLError) as error:
            writer.write(_refusal(502, f"{host} could not be reached over HTTPS: {error}"))
            await writer.drain()
            return
        await _exchange((line, headers), reader, writer, up_reader, up_writer)

    async def _plain(
        self,
        line: str,
        headers: list[tuple[str, str]],
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        """An `http://` request: no secret goes into it."""
        method, target, version = line.split(" ", 2)
        url = urlsplit(target)
        if url.scheme != "http" or not url.hostname:
            writer.write(_refusal(400, "a proxy request names an http:// URL"))
            return
        try:
            up_reader, up_writer = await self._open(url.hostname, url.port or 80, tls=False)
        except OSError:
            writer.write(_refusal(502, "the host could not be reached"))
            return
        path = url.path or "/"
        origin_form = f"{method} {path}{'?' + url.query if url.query else ''} {version}"
        await _exchange((origin_form, headers), reader, writer, up_reader, up_writer)


def rewritten(head: Head, bound: list[EgressSecret]) -> Head:
    """The request as it leaves for a bound host: each secret's placeholder replaced by its
    value in the URL and the headers, and a secret's own header set; never the body."""
    line, headers = head
    for secret in bound:
        line = line.replace(secret.placeholder, secret.value)
        headers = [
            (name, value.replace(secret.placeholder, secret.value)) for name, value in headers
        ]
    for secret in bound:
        if secret.header is not None:
            value = (secret.format or "{value}").replace("{value}", secret.value)
            headers = [h for h in headers if h[0].lower() != secret.header.lower()]
            headers.append((secret.header, value))
    return line, headers


async def read_head(reader: asyncio.StreamReader) -> Head | None:
    """A request's or answer's first line and headers; None at a clean end."""
    try:
        raw = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as error:
        if not error.partial:
            return None
        raise
    except asyncio.LimitOverrunError as error:
        raise ValueError("a head past the limit") from error
    if len(raw) > MAX_HEAD_BYTES:
        raise ValueError("a head past the limit")
    line, *rest = raw.decode("latin-1").split("\r\n")
    headers = []
    for field in rest:
        if field:
            name, _, value = field.partition(":")
            headers.append((name.strip(), value.strip()))
    return line, headers


def _closing(head: Head) -> bytes:
    """The head as sent on: hop-by-hop headers dropped, `Connection: close` added."""
    line, headers = head
    kept = [f"{name}: {value}" for name, value in headers if name.lower() not in _HOP]
    return ("\r\n".join([line, *kept, "Connection: close"]) + "\r\n\r\n").encode("latin-1")


async def _exchange(
    head: Head,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    up_reader: asyncio.StreamReader,
    up_writer: asyncio.StreamWriter,
) -> None:
    """One request sent on (its body as it comes), its answer streamed back to the end."""
    try:
        up_writer.write(_closing(head))
        await _body(head[1], reader, up_writer)
        answer = await read_head(up_reader)
        if answer is None:
            writer.write(_refusal(502, "the host closed the connection without an answer"))
            return
        writer.write(_closing(answer))
        while data := await up_reader.read(CHUNK):
            writer.write(data)
            await writer.drain()
        await writer.drain()
    finally:
        up_writer.close()


async def _body(
    headers: list[tuple[str, str]], reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    """A request's body, framed as its headers say, passed on as it is."""
    fields = {name.lower(): value for name, value in headers}
    if "chunked" in fields.get("transfer-encoding", "").lower():
        while True:
            size_line = await reader.readuntil(b"\r\n")
            writer.write(size_line)
            size = int(size_line.split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while (trailer := await reader.readuntil(b"\r\n")) != b"\r\n":
                    writer.write(trailer)
                writer.write(b"\r\n")
                break
            writer.write(await reader.readexactly(size + 2))
            await writer.drain()
    else:
        left = int(fields.get("content-length", "0") or "0")
        while left > 0:
            data = await reader.readexactly(min(left, CHUNK))
            writer.write(data)
            left -= len(data)
            await writer.drain()
    await writer.drain()


async def _both_ways(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    up_reader: asyncio.StreamReader,
    up_writer: asyncio.StreamWriter,
) -> None:
    """A tunnel: each side's bytes to the other until both ended."""

    async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        try:
            while data := await source.read(CHUNK):
                sink.write(data)
                await sink.drain()
        finally:
            with contextlib.suppress(OSError, RuntimeError):
                if sink.can_write_eof():
                    sink.write_eof()

    try:
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
    finally:
        up_writer.close()


def _refusal(status: int, why: str) -> bytes:
    body = f"fake Runtime egress proxy: {why}\n".encode()
    head = (
        f"HTTP/1.1 {status} {'Bad Gateway' if status == 502 else 'Bad Request'}\r\n"
        f"Content-Type: text/plain\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode() + body
