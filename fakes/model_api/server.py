"""`FakeModelApi`: the scripted fake of the model APIs on a loopback port, in threads.

    with FakeModelApi([tools(Shell("ls")), text("done")]) as fake:
        env = {"ANTHROPIC_BASE_URL": fake.anthropic_base_url}   # Claude Code
        base_url = fake.openai_base_url                          # Codex's provider base_url
        env = {"GOOGLE_GEMINI_BASE_URL": fake.gemini_base_url}  # Gemini CLI
        ...
        assert fake.session_ids() == [session_id]

It serves `POST /v1/messages` (Anthropic Messages, `?beta=true` or not),
`POST /v1/responses` (OpenAI Responses), `POST /v1/chat/completions` (OpenAI Chat
Completions) and `POST /v1beta/models/MODEL:streamGenerateContent` / `:generateContent` (the
Gemini API), each request answered by the script's next turn (`script.Script`), rendered
for its API (`routes.py`). Answers are streamed; a fake made with `honour_stream=True` gives
a request that does not ask for a stream (`"stream": true`) the whole answer as JSON, as the
real APIs do (the CLIs' tests were written against a fake that streams every answer, which
is the default); a Gemini request gets what its method asks for. Every request is logged
(`requests()`, `wait_for()`), with its headers, its parsed body, which turn answered it and
the tool calls that turn made. Other paths get a 404 and are listed in `unrouted`
(a CLI asking for something the fake does not serve, such as `/v1/models`).

Each connection has its own thread, so a held stream or a slow answer never stalls another
client; `close()` ends held streams and delays at once. Made with `tls=` (a server context,
e.g. `fakes.tls.CertAuthority.server_context(host)`), it speaks HTTPS, each connection's
handshake in its own thread.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import select
import socket
import ssl
import threading
import time
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import IO, Any
from urllib.parse import urlsplit

from fakes.model_api.recorded import RecordedRequest
from fakes.model_api.reply import Reply
from fakes.model_api.routes import render, route
from fakes.model_api.script import Script
from fakes.model_api.turns import Answer, Api


class FakeModelApi:
    """Use as a context manager (or `start()` / `close()`). `port=0` picks a free port.
    `log_file`, when given, gets one JSON line per request (its summary and body)."""

    def __init__(
        self,
        script: Script | Sequence[Answer] = (),
        *,
        port: int = 0,
        log_file: Path | None = None,
        clock: Callable[[], float] = time.time,
        honour_stream: bool = False,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.honour_stream = honour_stream
        self.tls = tls
        self.script = script if isinstance(script, Script) else Script(script)
        self._clock = clock
        self._port = port
        self._log: list[RecordedRequest] = []
        self.unrouted: list[str] = []  # "METHOD path" of requests to other paths
        self._changed = threading.Condition()
        self._closing = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._log_stream: IO[str] | None = None
        self._log_file = log_file

    # --- lifecycle ---

    def start(self) -> FakeModelApi:
        if self._log_file is not None:
            self._log_stream = self._log_file.open("a", encoding="utf-8")
        server = _Server(("127.0.0.1", self._port), _handler_for(self))
        server.tls = self.tls
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.1}, name="fake-model-api"
        )
        self._thread.daemon = True
        self._thread.start()
        return self

    def close(self) -> None:
        self._closing.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._log_stream is not None:
            self._log_stream.close()
            self._log_stream = None

    def __enter__(self) -> FakeModelApi:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # --- where it is ---

    @property
    def port(self) -> int:
        assert self._server is not None, "start the fake first"
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    @property
    def anthropic_base_url(self) -> str:
        """For `ANTHROPIC_BASE_URL` (the client adds `/v1/messages`)."""
        return self.url

    @property
    def openai_base_url(self) -> str:
        """For Codex's `model_providers.NAME.base_url` (the client adds `/responses`)."""
        return self.url + "/v1"

    @property
    def gemini_base_url(self) -> str:
        """For Gemini CLI's `GOOGLE_GEMINI_BASE_URL` (the client adds `/v1beta/models/...`)."""
        return self.url

    # --- the log ---

    def requests(self, api: Api | None = None) -> list[RecordedRequest]:
        """Every request so far, in the order received (model API routes only)."""
        with self._changed:
            return [r for r in self._log if r.api == api or api is None]

    def answered(self, api: Api | None = None) -> list[RecordedRequest]:
        """The requests already answered (their turn and status known)."""
        return [r for r in self.requests(api) if r.status]

    def session_ids(self) -> list[str]:
        """The distinct session ids the requests carried, in order of first use."""
        seen: list[str] = []
        for request in self.requests():
            if request.session_id not in seen:
                seen.append(request.session_id)
        return seen

    def wait_for(
        self, predicate: Callable[[list[RecordedRequest]], bool], timeout: float = 30
    ) -> list[RecordedRequest]:
        """Wait until `predicate(requests)` holds; the requests then. TimeoutError if not."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not predicate(list(self._log)):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(
                        f"the fake model API saw {len(self._log)} requests in {timeout} s; "
                        f"last: {[r.summary() for r in self._log[-3:]]}"
                    )
                self._changed.wait(left)
            return list(self._log)

    def wait_for_requests(self, count: int, timeout: float = 30) -> list[RecordedRequest]:
        """Wait until `count` requests were received (not necessarily answered)."""
        return self.wait_for(lambda log: len(log) >= count, timeout)

    def wait_for_answers(self, count: int, timeout: float = 30) -> list[RecordedRequest]:
        """Wait until `count` requests were answered (their answer's last byte sent)."""
        return self.wait_for(lambda log: sum(1 for r in log if r.status) >= count, timeout)

    # --- used by the handler ---

    def _receive(
        self, api: Api, method: str, target: str, headers: dict[str, str], body: Any
    ) -> RecordedRequest:
        parts = urlsplit(target)
        with self._changed:
            request = RecordedRequest(
                number=len(self._log) + 1,
                api=api,
                method=method,
                path=parts.path,
                query=parts.query,
                headers=headers,
                body=body,
                received_at=time.monotonic(),
                received_at_epoch=time.time(),
            )
            self._log.append(request)
            self._changed.notify_all()
        return request

    def _answer(self, request: RecordedRequest) -> Reply:
        choice = self.script.choose(request)
        reply = render(request, choice.turn, self._clock(), honour_stream=self.honour_stream)
        self._update(
            request,
            turn_index=choice.index,
            label=choice.turn.label,
            call_ids=reply.call_ids,
        )
        return reply

    def _log_answer(self, request: RecordedRequest, status: int) -> None:
        recorded = self._update(request, status=status)
        if self._log_stream is not None:
            line = recorded.summary() | {"headers": dict(recorded.headers), "body": recorded.body}
            with self._changed:
                self._log_stream.write(json.dumps(line) + "\n")
                self._log_stream.flush()

    def _update(self, request: RecordedRequest, **changes: Any) -> RecordedRequest:
        with self._changed:
            current = self._log[request.number - 1]
            updated = dataclasses.replace(current, **changes)
            self._log[request.number - 1] = updated
            self._changed.notify_all()
            return updated

    def _wait(self, seconds: float) -> bool:
        """Sleep up to `seconds`; False when the fake closed meanwhile."""
        return not self._closing.wait(seconds)


class _Server(ThreadingHTTPServer):
    # Room for many clients connecting at once (the standard library's 5 drops the rest's
    # SYNs, which they send again a second later).
    request_queue_size = 128
    tls: ssl.SSLContext | None = None

    def finish_request(self, request: Any, client_address: Any) -> None:
        if self.tls is None:
            super().finish_request(request, client_address)
            return
        try:  # in the connection's own thread: a slow handshake stalls no other client
            wrapped = self.tls.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError):
            return
        try:
            super().finish_request(wrapped, client_address)
        finally:
            wrapped.close()  # the plain socket it wrapped is detached: closed only here


def _handler_for(fake: FakeModelApi) -> type[BaseHTTPRequestHandler]:
    class Handler(_Handler):
        pass

    Handler.fake = fake
    return Handler


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Its head and body go out in separate writes: without this, a kept-open connection's
    # body waits for the client's delayed ACK of the head (40 ms), which no real API costs.
    disable_nagle_algorithm = True
    fake: FakeModelApi

    def do_POST(self) -> None:  # noqa: N802 (the http.server name)
        body = self._read_body()
        api = route(self.path)
        if api is None:
            self._not_found()
            return
        headers = {name.lower(): value for name, value in self.headers.items()}
        try:
            parsed = json.loads(body) if body else None
        except ValueError:
            parsed = None
        request = self.fake._receive(api, "POST", self.path, headers, parsed)
        reply = self.fake._answer(request)
        # Logged before the answer goes out: a client may act on its last byte (run the
        # tool it names) before this thread runs again, and whoever sees that act must
        # find the request in the log.
        self.fake._log_answer(request, reply.status)
        try:
            self._send(reply)
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            self.close_connection = True

    def do_GET(self) -> None:  # noqa: N802
        self._not_found()

    def _not_found(self) -> None:
        with self.fake._changed:
            self.fake.unrouted.append(f"{self.command} {self.path}")
        self._send_plain(404, {"error": {"type": "not_found_error", "message": self.path}})

    def _read_body(self) -> bytes:
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            data = b""
            while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                data += self.rfile.read(size)
                self.rfile.readline()
            self.rfile.readline()
        else:
            data = self.rfile.read(int(self.headers.get("content-length") or 0))
        if self.headers.get("content-encoding", "").lower() == "gzip":
            data = gzip.decompress(data)
        return data

    def _send(self, reply: Reply) -> None:
        if reply.delay_seconds and not self.fake._wait(reply.delay_seconds):
            self.close_connection = True
            return
        if not reply.streamed:
            self._send_plain(reply.status, None, reply)
            return
        self._status(reply.status)
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        for event in reply.events_to_send():
            self.wfile.write(f"{len(event):x}\r\n".encode() + event + b"\r\n")
            self.wfile.flush()
        if reply.cut_after is None:
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
            return
        self.close_connection = True
        if reply.hold_open:
            self._hold_until_gone()

    def _hold_until_gone(self) -> None:
        """Keep the connection open and silent until the client leaves or the fake closes."""
        while self.fake._wait(0.1):
            readable, _, _ = select.select([self.connection], [], [], 0)
            if readable and not self.connection.recv(1, socket.MSG_PEEK):  # b"": a hang-up
                return

    def _send_plain(self, status: int, value: Any, reply: Reply | None = None) -> None:
        body = reply.body if reply is not None else json.dumps(value).encode()
        headers = reply.headers if reply is not None else {"content-type": "application/json"}
        self._status(status)
        for name, header in headers.items():
            self.send_header(name, header)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()

    def _status(self, status: int) -> None:
        self.send_response(status, "Overloaded" if status == 529 else None)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the fake's own log is `requests()`."""
