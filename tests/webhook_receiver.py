"""A webhook receiver on loopback for the notification tests, as a careful receiver is written.

It checks each POST's signature (`X-Overnight-Signature`: HMAC-SHA256 of
`<X-Overnight-Timestamp>.<body>` under the shared secret), refuses a stale timestamp (a
replay), and drops a repeat of an event it has already accepted, answering 200 all the same:
the `event_id` of the signed body (the `Idempotency-Key` header, which is not signed, only for
a body without one, such as Slack's format). `down()` closes its port (connections are
refused) and `up()` opens the same port again; `failing = 503` answers with that status
instead.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

MAX_AGE_SECONDS = 300


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes
    signed: bool
    fresh: bool
    repeat: bool

    @property
    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def event(self) -> str:
        return self.headers.get("x-overnight-event", "")

    @property
    def event_id(self) -> str:
        """The event's id from the (signed) body; the header's for a body without one."""
        try:
            found = json.loads(self.body).get("event_id")
        except (ValueError, AttributeError):
            found = None
        return found if isinstance(found, str) else self.headers.get("idempotency-key", "")


@dataclass
class Receiver:
    secret: str | None = None
    port: int = 0
    failing: int | None = None
    # Every POST that reached it (refused ones too), and the ones it accepted, in order.
    seen: list[Received] = field(default_factory=list)
    accepted: list[Received] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hooks/overnight"

    def up(self) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length)
                status = receiver._take({k.lower(): v for k, v in self.headers.items()}, body)
                self.send_response(status)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def down(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> Receiver:
        return self.up()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.down()

    def verify(self, headers: dict[str, str], body: bytes) -> bool:
        if self.secret is None:
            return "x-overnight-signature" not in headers
        stamp = headers.get("x-overnight-timestamp", "")
        mac = hmac.new(self.secret.encode(), stamp.encode() + b"." + body, hashlib.sha256)
        expected = "sha256=" + mac.hexdigest()
        return hmac.compare_digest(expected, headers.get("x-overnight-signature", ""))

    def events(self) -> list[str]:
        with self._lock:
            return [r.event for r in self.accepted]

    def _take(self, headers: dict[str, str], body: bytes) -> int:
        signed = self.verify(headers, body)
        try:
            age = abs(time.time() - int(headers.get("x-overnight-timestamp", "0")))
            fresh = age < MAX_AGE_SECONDS
        except ValueError:
            fresh = False
        with self._lock:
            got = Received(headers, body, signed, fresh, False)
            got.repeat = any(r.event_id == got.event_id for r in self.accepted)
            self.seen.append(got)
            if self.failing is not None:
                return self.failing
            if not signed or not fresh:
                return 401
            if not got.repeat:
                self.accepted.append(got)
            return 200
