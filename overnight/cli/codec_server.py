"""`overnight codec-server`: Temporal's remote codec protocol over overnight's payload codec, so
the Web UI (and `temporal --codec-endpoint`) show encrypted payloads decoded.

The protocol: `POST /encode` and `POST /decode` (also under a namespace segment,
`/{namespace}/decode`, for the CLI's endpoint templating), a JSON body `{"payloads": [...]}` of
payloads in proto3 JSON (bytes as base64), answered in the same shape; the caller names its
namespace in `X-Namespace`. A browser calls it from the Web UI's page, so it answers CORS
preflights for the allowed origins only. With a token, every call must carry
`Authorization: Bearer <token>`. Bound to 127.0.0.1 unless told otherwise: whoever reaches it
reads every payload.

Only the standard library: a small asyncio HTTP server (`bounded_http`) whose connections
cost no thread, with a read timeout, a body cap and a cap on what it holds at once, since
whoever reaches it can try to hold it (no web framework to install).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hmac
import json
import logging
import os
import signal
import socket
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from http import HTTPStatus

from google.protobuf.json_format import MessageToDict, ParseDict, ParseError
from temporalio.api.common.v1 import Payload

from overnight.cli.bounded_http import BoundedHttpServer, Limits, Request, Response
from overnight.cli.commands import Command
from overnight.core.codec import (
    CODEC_KEYS_ENV,
    KEY_ID_METADATA,
    CodecConfigError,
    CodecKeyError,
    Keyring,
    keyring_from_env,
)
from overnight.core.local_services import Declared

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8081
# Where the bearer token may come from instead of --token (which `ps` shows to everyone).
TOKEN_ENV = "OVERNIGHT_CODEC_SERVER_TOKEN"
# The largest body accepted. A caller sends the payloads of what it read from the server:
# Temporal refuses a payload over 2 MB and a gRPC message over 4 MB (docs.temporal.io:
# /troubleshooting/blob-size-limit-error, /kb/temporal-platform-limits-sheet), so no call
# honestly carries more than 4 MiB of payloads; as base64 in proto3 JSON that is 5 1/3 MiB,
# and the rest is room for the JSON and the metadata.
MAX_BODY_BYTES = 6 * 1024 * 1024
# Headers and body within this long of the connection's start; the answer taken within it too.
READ_TIMEOUT_SECONDS = 10.0
ALLOWED_HEADERS = "Content-Type, X-Namespace, Authorization"
# What it says of a payload it cannot decrypt, whether it lacks the payload's key id or holds
# another key under it: the same answer, so no caller learns which ids it holds.
UNDECRYPTABLE = (
    "a payload under key id {key_id} does not decrypt here: this codec server holds no key "
    "under that id, or another key than the payload's (or the payload was altered)"
)
log = logging.getLogger(__name__)


def default_limits() -> Limits:
    return Limits(
        read_timeout_seconds=READ_TIMEOUT_SECONDS,
        write_timeout_seconds=READ_TIMEOUT_SECONDS,
        max_body_bytes=MAX_BODY_BYTES,
        # Four bodies of the largest size at once (a browser opens six connections a host).
        max_buffered_bytes=4 * MAX_BODY_BYTES,
    )


@dataclass(frozen=True)
class CodecServerSettings:
    keyring: Keyring
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    origins: tuple[str, ...] = ()
    token: str | None = None
    limits: Limits = field(default_factory=default_limits)


class _BadRequest(Exception):
    def __init__(self, status: HTTPStatus, message: str) -> None:
        super().__init__(message)
        self.status = status


def convert(keyring: Keyring, operation: str, body: bytes) -> bytes:
    """One `/encode` or `/decode` call: the answer's body, or `_BadRequest` saying why not."""
    try:
        document = json.loads(body)
        items = document["payloads"]
        if not isinstance(items, list):
            raise TypeError("payloads is not a list")
        payloads = [ParseDict(item, Payload()) for item in items]
    except (ValueError, KeyError, TypeError, ParseError) as err:
        raise _BadRequest(
            HTTPStatus.BAD_REQUEST, f'expected {{"payloads": [...]}} of payloads: {err}'
        ) from None
    step = keyring.encrypt if operation == "encode" else keyring.decrypt
    done = []
    for payload in payloads:
        try:
            done.append(step(payload))
        except CodecKeyError:
            # The keyring's own message names the ids it holds: not for whoever calls.
            key_id = payload.metadata.get(KEY_ID_METADATA, b"")[:64]
            shown = repr(key_id.decode("utf-8", "replace"))
            raise _BadRequest(HTTPStatus.BAD_REQUEST, UNDECRYPTABLE.format(key_id=shown)) from None
    return json.dumps({"payloads": [MessageToDict(p) for p in done]}).encode()


class _Codec:
    """The protocol over the bounded server: what is served, to whom, and the answers."""

    def __init__(self, settings: CodecServerSettings) -> None:
        self.settings = settings

    def check(self, request: Request) -> Response | None:
        """A request's head, before its body is read: refused here, none of it is read."""
        if request.method == "OPTIONS":
            # A CORS preflight: no token needed (browsers send none on a preflight).
            allowed = self._origin_allowed(request)
            return Response(HTTPStatus.NO_CONTENT if allowed else HTTPStatus.FORBIDDEN)
        if request.method != "POST":
            return _error(
                HTTPStatus.METHOD_NOT_ALLOWED, "POST /encode or /decode", ("Allow", "POST, OPTIONS")
            )
        if _operation(request) not in ("encode", "decode"):
            return _error(HTTPStatus.NOT_FOUND, "only /encode and /decode are served")
        if "origin" in request.headers and not self._origin_allowed(request):
            # Another page in a browser on this machine: a loopback server is no secret.
            return _error(HTTPStatus.FORBIDDEN, "this origin is not allowed")
        token = self.settings.token
        given = request.headers.get("authorization", "").encode()
        if token is not None and not hmac.compare_digest(given, f"Bearer {token}".encode()):
            return _error(HTTPStatus.UNAUTHORIZED, "a valid Authorization: Bearer is needed")
        return None

    def handle(self, request: Request) -> Response:
        """A checked request with its body (in a worker thread)."""
        try:
            answer = convert(self.settings.keyring, _operation(request), request.body)
        except _BadRequest as bad:
            return _error(bad.status, str(bad))
        return Response(HTTPStatus.OK, answer)

    def cors(self, request: Request) -> tuple[tuple[str, str], ...]:
        origin = request.headers.get("origin")
        if origin is None or not self._origin_allowed(request):
            return ()
        return (
            ("Access-Control-Allow-Origin", origin),
            ("Access-Control-Allow-Methods", "POST, OPTIONS"),
            ("Access-Control-Allow-Headers", ALLOWED_HEADERS),
            ("Access-Control-Allow-Credentials", "true"),
            ("Access-Control-Max-Age", "600"),
            ("Vary", "Origin"),
        )

    def _origin_allowed(self, request: Request) -> bool:
        return request.headers.get("origin") in self.settings.origins


def _operation(request: Request) -> str:
    return request.path.rstrip("/").rsplit("/", 1)[-1]


def _error(status: HTTPStatus, message: str, *headers: tuple[str, str]) -> Response:
    return Response(status, json.dumps({"error": message}).encode(), headers)


class CodecServer:
    """The server on its own thread and event loop: `start()`, `url`, `stop()`; a context
    manager too. `connections` and `buffered_bytes` are what it holds now."""

    def __init__(self, settings: CodecServerSettings) -> None:
        self.settings = settings
        family = socket.getaddrinfo(settings.host, settings.port, type=socket.SOCK_STREAM)[0][0]
        self._sock = socket.create_server((settings.host, settings.port), family=family)
        codec = _Codec(settings)
        self._http = BoundedHttpServer(
            self._sock,
            codec.handle,
            limits=settings.limits,
            check=codec.check,
            headers_for=codec.cors,
            server_name="overnight-codec",
            log=log,
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._declared = contextlib.ExitStack()

    @property
    def url(self) -> str:
        host, port = self._sock.getsockname()[:2]
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{port}"

    @property
    def connections(self) -> int:
        return self._http.connections

    @property
    def buffered_bytes(self) -> int:
        return self._http.buffered_bytes

    def start(self) -> CodecServer:
        # Workers on this machine keep its port out of their sandboxes' host_ports.
        self._declared.enter_context(Declared("codec-server"))
        loop = asyncio.new_event_loop()
        ready = threading.Event()

        def serve() -> None:
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self._http.start())
            finally:
                ready.set()
            loop.run_forever()
            loop.run_until_complete(self._http.close())
            loop.close()

        self._loop = loop
        self._thread = threading.Thread(target=serve, name="codec-server", daemon=True)
        self._thread.start()
        ready.wait()
        return self

    def stop(self) -> None:
        if self._thread is not None and self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
            self._thread = None
        self._sock.close()
        self._declared.close()

    def __enter__(self) -> CodecServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def default_origins() -> tuple[str, ...]:
    """The embedded Web UI's origins (temporal-dev.yaml's UI port, by IP and by name)."""
    from overnight.worker.devconfig import DevConfigError, default_dev_config

    try:
        config = default_dev_config()
    except DevConfigError:
        port = 8233
    else:
        port = config.ui_port
    return (f"http://127.0.0.1:{port}", f"http://localhost:{port}")


def origins_or_default(given: Sequence[str] | None) -> tuple[str, ...]:
    return tuple(origin.rstrip("/") for origin in given) if given else default_origins()


def _arguments(server: argparse.ArgumentParser) -> None:
    server.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"port to listen on (default {DEFAULT_PORT})"
    )
    server.add_argument(
        "--host", default=DEFAULT_HOST, help="address to bind (default: loopback only)"
    )
    server.add_argument(
        "--origin",
        action="append",
        metavar="URL",
        help="a Web UI origin allowed to call it (repeatable; default: the embedded UI's)",
    )
    server.add_argument("--token", help=f"require Authorization: Bearer TOKEN (or set {TOKEN_ENV})")


def settings_from_args(args: argparse.Namespace) -> CodecServerSettings:
    keyring = keyring_from_env()
    if keyring is None:
        raise CodecConfigError(f"{CODEC_KEYS_ENV} is not set: the codec server has no keys")
    if not 0 < args.port < 65536:
        raise CodecConfigError(f"--port: {args.port} is not a TCP port")
    return CodecServerSettings(
        keyring=keyring,
        host=args.host,
        port=args.port,
        origins=origins_or_default(args.origin),
        token=args.token or os.environ.get(TOKEN_ENV) or None,
    )


async def run(args: argparse.Namespace) -> int:
    """Serve until SIGINT or SIGTERM."""
    settings = settings_from_args(args)
    try:
        server = CodecServer(settings)
    except OSError as err:
        raise CodecConfigError(f"cannot listen on {settings.host}:{settings.port}: {err}") from None
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    with server:
        print(
            f"codec server at {server.url} (keys {settings.keyring.ids}, writing with "
            f"{settings.keyring.writer!r}; origins {', '.join(settings.origins)}; "
            f"token {'required' if settings.token else 'not required'}); Ctrl-C stops",
            flush=True,
        )
        await stop.wait()
    return 0


COMMANDS = (
    Command(
        "codec-server",
        f"decode encrypted payloads for the Web UI ({CODEC_KEYS_ENV}'s keys, over HTTP)",
        _arguments,
        run,
    ),
)
