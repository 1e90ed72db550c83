"""Test origins over the network: a loopback git server (smart HTTP, pushes allowed).

An isolated sandbox sees no host folder it was not given, and a Runtime sandbox (here: the
fake Runtime API's, isolated like a local one) could never clone one: a real one clones from
a git server. `git_url(origin)` serves a bare repository from this process through
`git http-backend` and gives its URL; `origin_fields(origin, provider)` gives the spec's
`repo` and `binds` for either provider (local: the folder itself, bound writable so the
agent's pushes land).
"""

from __future__ import annotations

import base64
import os
import secrets
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

_repos: dict[str, Path] = {}
# Repositories served only with a credential (as a private one on GitHub): token -> password.
_private: dict[str, str] = {}
_server: ThreadingHTTPServer | None = None
_starting = threading.Lock()


def git_url(origin: Path, *, owner: str | None = None) -> str:
    """An http:// URL on 127.0.0.1 that serves (and takes pushes to) the bare repo `origin`
    (at `/owner/name`, as GitHub would, when `owner` is given)."""
    host, port = _serve().server_address[:2]
    return f"http://{host!s}:{port}{git_path(origin, owner=owner)}"


def git_path(origin: Path, *, password: str | None = None, owner: str | None = None) -> str:
    """The path at which every server of this module serves `origin` (`/token/name`, or
    `/owner/name`: an owner serves one repository); with `password`, only to a request whose
    basic authentication carries it (any user name, as GitHub takes a token), else 401 asking
    for one."""
    token = owner or secrets.token_hex(6)
    if _repos.get(token, origin.resolve()) != origin.resolve():
        raise ValueError(f"{token!r} already serves {_repos[token]}")
    _repos[token] = origin.resolve()
    if password is not None:
        _private[token] = password
    return f"/{token}/{origin.name}"


def private_git_url(origin: Path, password: str) -> str:
    """An http:// URL serving `origin` only to requests carrying `password`."""
    host, port = _serve().server_address[:2]
    return f"http://{host!s}:{port}{git_path(origin, password=password)}"


def serve_on(port: int) -> ThreadingHTTPServer:
    """A server of its own on 127.0.0.1:`port`, from now on (a git server that answers only
    after a while); the caller shuts it down (`shutdown()`, `server_close()`)."""
    server = ThreadingHTTPServer(("127.0.0.1", port), _Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name=f"git-http-{port}", daemon=True).start()
    return server


def origin_fields(origin: Path, provider: str) -> dict[str, Any]:
    """`repo` and `binds` of a spec whose agent clones and pushes to `origin`."""
    if provider == "local":
        return {"repo": str(origin), "binds": [{"path": str(origin), "writable": True}]}
    return {"repo": git_url(origin), "binds": []}


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (the http.server name)
        self._backend(b"")

    def do_POST(self) -> None:  # noqa: N802
        self._backend(self._body())

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() != "chunked":
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))
        data = b""
        while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
            data += self.rfile.read(size)
            self.rfile.readline()
        self.rfile.readline()
        return data

    def _backend(self, body: bytes) -> None:
        path, _, query = self.path.partition("?")
        token, _, rest = path.lstrip("/").partition("/")
        repo = _repos.get(token)
        if repo is None or not rest.startswith(repo.name + "/"):
            self.send_error(404)
            return
        if token in _private and not self._carries(_private[token]):
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="fake git"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        env = {
            "PATH": os.environ.get("PATH", os.defpath),
            "GIT_PROJECT_ROOT": str(repo.parent),
            "GIT_HTTP_EXPORT_ALL": "1",
            "REMOTE_USER": "agent",  # receive-pack (push) is allowed for a known user
            "REMOTE_ADDR": "127.0.0.1",
            "REQUEST_METHOD": self.command,
            "PATH_INFO": "/" + rest,
            "QUERY_STRING": query,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "HTTP_CONTENT_ENCODING": self.headers.get("Content-Encoding", ""),
            "HTTP_GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
        }
        done = subprocess.run(
            ["git", "http-backend"], input=body, env=env, capture_output=True, timeout=120
        )
        head, _, payload = done.stdout.partition(b"\r\n\r\n")
        status, headers = 200, []
        for line in head.decode("latin-1").split("\r\n"):
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.split()[0])
            elif name:
                headers.append((name, value.strip()))
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _carries(self, password: str) -> bool:
        scheme, _, encoded = self.headers.get("Authorization", "").partition(" ")
        try:
            pair = base64.b64decode(encoded).decode()
        except (ValueError, UnicodeDecodeError):
            return False
        return scheme.lower() == "basic" and pair.partition(":")[2] == password

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""


def _serve() -> ThreadingHTTPServer:
    global _server
    with _starting:
        if _server is None:
            server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
            server.daemon_threads = True
            threading.Thread(target=server.serve_forever, name="git-http", daemon=True).start()
            _server = server
        return _server
