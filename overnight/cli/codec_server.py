"""`overnight codec-server`: Temporal's remote codec protocol over overnight's payload codec, so
the Web UI (and `temporal --codec-endpoint`) show encrypted payloads decoded.

The protocol: `POST /encode` and `POST /decode` (also under a namespace segment,
`/{namespace}/decode`, for the CLI's endpoint templating), a JSON body `{"payloads": [...]}` of
payloads in proto3 JSON (bytes as base64), answered in the same shape; the caller names its
namespace in `X-Namespace`. A browser calls it from the Web UI's page, so it answers CORS
preflights for the allowed origins only. With a token, every call must carry
`Authorization: Bearer <token>`. Bound to 127.0.0.1 unless told otherwise: whoever reaches it
reads every payload.

Only the standard library's threading HTTP server: no web framework to install.
"""

from __future__ import annotations

import argparse
import asyncio
import hmac
import json
import logging
import os
import signal
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from google.protobuf.json_format import MessageToDict, ParseDict, ParseError
from temporalio.api.common.v1 import Payload

from overnight.codec import (
    CODEC_KEYS_ENV,
    CodecConfigError,
    CodecKeyError,
    Keyring,
    keyring_from_env,
)

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8081
# Where the bearer token may come from instead of --token (which `ps` shows to everyone).
TOKEN_ENV = "OVERNIGHT_CODEC_SERVER_TOKEN"
# The largest body accepted: a page of history's payloads, each at most Temporal's 2 MiB.
MAX_BODY_BYTES = 64 * 1024 * 1024
ALLOWED_HEADERS = "Content-Type, X-Namespace, Authorization"
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CodecServerSettings:
    keyring: Keyring
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    origins: tuple[str, ...] = ()
    token: str | None = None


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
    try:
        done = [step(payload) for payload in payloads]
    except CodecKeyError as err:
        raise _BadRequest(HTTPStatus.BAD_REQUEST, str(err)) from None
    return json.dumps({"payloads": [MessageToDict(p) for p in done]}).encode()


class _Handler(BaseHTTPRequestHandler):
    server_version = "overnight-codec"
    settings: CodecServerSettings  # set on the subclass made per server

    def do_OPTIONS(self) -> None:  # noqa: N802 - the http.server naming
        # A CORS preflight: no token needed (browsers send none on a preflight).
        self._answer(HTTPStatus.NO_CONTENT if self._origin_allowed() else HTTPStatus.FORBIDDEN)

    def do_POST(self) -> None:  # noqa: N802
        operation = self.path.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]
        try:
            if operation not in ("encode", "decode"):
                raise _BadRequest(HTTPStatus.NOT_FOUND, "only /encode and /decode are served")
            if "Origin" in self.headers and not self._origin_allowed():
                # Another page in a browser on this machine: a loopback server is no secret.
                raise _BadRequest(HTTPStatus.FORBIDDEN, "this origin is not allowed")
            self._check_token()
            body = self._read_body()
            answer = convert(self.settings.keyring, operation, body)
        except _BadRequest as bad:
            self._answer(bad.status, json.dumps({"error": str(bad)}).encode())
            return
        except Exception:  # noqa: BLE001 - answered, and logged without the payloads
            log.exception("codec server: %s failed", operation)
            self._answer(HTTPStatus.INTERNAL_SERVER_ERROR, b'{"error": "internal error"}')
            return
        self._answer(HTTPStatus.OK, answer)

    def do_GET(self) -> None:  # noqa: N802
        self._answer(
            HTTPStatus.METHOD_NOT_ALLOWED, b'{"error": "POST /encode or /decode"}', allow=True
        )

    def _check_token(self) -> None:
        token = self.settings.token
        if token is None:
            return
        given = self.headers.get("Authorization", "")
        if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
            raise _BadRequest(HTTPStatus.UNAUTHORIZED, "a valid Authorization: Bearer is needed")

    def _read_body(self) -> bytes:
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            raise _BadRequest(HTTPStatus.LENGTH_REQUIRED, "Content-Length is needed") from None
        if not 0 <= length <= MAX_BODY_BYTES:
            raise _BadRequest(
                HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"bodies are at most {MAX_BODY_BYTES} bytes"
            )
        return self.rfile.read(length)

    def _origin_allowed(self) -> bool:
        return self.headers.get("Origin") in self.settings.origins

    def _answer(self, status: HTTPStatus, body: bytes = b"", allow: bool = False) -> None:
        self.send_response(status)
        origin = self.headers.get("Origin")
        if origin is not None and self._origin_allowed():
            self.send_header("Access-Control-Allow-Origin", origin)
            self.send_header("Access-Control-Allow-Methods", "POST, OPTIONS")
            self.send_header("Access-Control-Allow-Headers", ALLOWED_HEADERS)
            self.send_header("Access-Control-Allow-Credentials", "true")
            self.send_header("Access-Control-Max-Age", "600")
            self.send_header("Vary", "Origin")
        if allow:
            self.send_header("Allow", "POST, OPTIONS")
        if body:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body:
            self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        # The request line and status only: never a payload, never a header's value.
        log.info("%s %s", self.address_string(), format % args)


class CodecServer:
    """The HTTP server on its own thread: `start()`, `url`, `stop()`; a context manager too."""

    def __init__(self, settings: CodecServerSettings) -> None:
        handler = type("Handler", (_Handler,), {"settings": settings})
        self.settings = settings
        self._http = ThreadingHTTPServer((settings.host, settings.port), handler)
        self._http.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self._http.server_address[:2]
        host = host.decode() if isinstance(host, bytes) else host
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{port}"

    def start(self) -> CodecServer:
        self._thread = threading.Thread(
            target=self._http.serve_forever, name="codec-server", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self._http.shutdown()
            self._thread.join()
            self._thread = None
        self._http.server_close()

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


def add_parser(commands: argparse._SubParsersAction, parser_class: type) -> None:  # type: ignore[type-arg]
    server = commands.add_parser(
        "codec-server",
        help=f"decode encrypted payloads for the Web UI ({CODEC_KEYS_ENV}'s keys, over HTTP)",
    )
    server.add_argument("--port", type=int, default=DEFAULT_PORT)
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
