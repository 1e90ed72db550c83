"""The fake GitHub's HTTP side: one request read, handed to `FakeGitHub.serve`, its answer
written (or the connection dropped, when a scripted failure says so)."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fakes.github_api.server import FakeGitHub


def handler_for(fake: FakeGitHub) -> type[BaseHTTPRequestHandler]:
    class Handler(_Handler):
        pass

    Handler.fake = fake
    return Handler


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    fake: FakeGitHub

    def do_GET(self) -> None:  # noqa: N802 (the http.server name)
        self._handle()

    def do_POST(self) -> None:  # noqa: N802
        self._handle()

    def do_PATCH(self) -> None:  # noqa: N802
        self._handle()

    def _handle(self) -> None:
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        headers = {name.lower(): value for name, value in self.headers.items()}
        answer = self.fake.serve(self.command, self.path, headers, raw)
        if answer is None:
            self.close_connection = True
            return
        if answer.status == 304:
            data = b""
        elif isinstance(answer.body, bytes):
            data = answer.body
        else:
            data = json.dumps(answer.body).encode()
            answer.headers.setdefault("content-type", "application/json; charset=utf-8")
        self.send_response(answer.status)
        for name, value in answer.headers.items():
            self.send_header(name, value)
        if answer.status != 304:
            self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the fake's own log is `requests()`."""
