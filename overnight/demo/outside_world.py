"""The sample agent's outside world: a loopback HTTP service keeping ledgers of outside actions.

A real agent's outside actions (opening a pull request, posting a summary) go to services
over the network; this service stands in for them. It listens on the worker's loopback, which
an isolated local sandbox reaches only on the ports its spec lists (`host_ports_for`).
Each ledger is a JSONL file on the host, one line per action. An action is recorded once per
key (`{run_id}-step-{n}`), so a step redone after a crash does not act twice. The sample
agent's failure switches, which fire once per run, are remembered next to the ledger.

    POST {url}/actions  {"key", "action", "detail"}  -> {"done": true} the first time for a key
    POST {url}/once     {"run_id", "switch"}         -> {"first": true} the first time
    GET  {url}/actions                               -> {"actions": [...]}

`ledger_url(path)` starts the service in this process on first use (a daemon thread on
127.0.0.1) and gives the URL that writes to `path`; the agent gets it as
`OVERNIGHT_LEDGER_URL`.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import secrets
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

from overnight.core.local_services import serve_to_agents
from overnight.core.provider_traits import traits

MAX_BODY = 64 * 1024
_SWITCH = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
_ledgers: dict[str, Path] = {}
_server: ThreadingHTTPServer | None = None
_starting = threading.Lock()


def ledger_url(ledger: Path) -> str:
    """The URL of a ledger kept in the file `ledger` (created on the first action)."""
    server = _serve()
    token = secrets.token_hex(8)
    _ledgers[token] = ledger
    host, port = server.server_address[:2]
    return f"http://{host!s}:{port}/ledgers/{token}"


def host_ports_for(url: str | None, provider: str = "local") -> list[int]:
    """What a spec whose agent reaches the outside world at `url` lists as `host_ports`: its
    loopback port for a local sandbox (a network of its own reaches the worker's loopback
    only there), nothing for a provider whose sandboxes cannot reach the worker."""
    if not url or not traits(provider).reaches_worker_loopback:
        return []
    port = urlsplit(url).port
    return [port] if port is not None else []


@contextlib.contextmanager
def _locked(ledger: Path) -> Iterator[IO[str]]:
    ledger.parent.mkdir(parents=True, exist_ok=True)
    with open(ledger, "a+", encoding="utf-8") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield handle
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def record_action(ledger: Path, key: str, action: str, detail: str) -> bool:
    """Record `action` under `key` unless it is recorded already. True when done now."""
    with _locked(ledger) as handle:
        handle.seek(0)
        for line in handle:
            with contextlib.suppress(ValueError):
                if json.loads(line).get("key") == key:
                    return False
        entry = {"key": key, "action": action, "detail": detail, "at": time.time()}
        handle.write(json.dumps(entry) + "\n")
        handle.flush()
        os.fsync(handle.fileno())
        return True


def fire_once(ledger: Path, run_id: str, switch: str) -> bool:
    """True the first time `switch` is reached in run `run_id`, False ever after."""
    if not (_SWITCH.match(run_id) and _SWITCH.match(switch)):
        raise ValueError("bad run id or switch name")
    ledger.parent.mkdir(parents=True, exist_ok=True)
    try:
        with open(ledger.parent / f".{run_id}.{switch}", "x", encoding="utf-8"):
            return True
    except FileExistsError:
        return False


def _entries(ledger: Path) -> list[Any]:
    if not ledger.exists():
        return []
    return [json.loads(line) for line in ledger.read_text(encoding="utf-8").splitlines() if line]


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (the http.server name)
        ledger, what = self._route()
        if ledger is None or what != "actions":
            return self._answer(404, {"error": "no such ledger"})
        self._answer(200, {"actions": _entries(ledger)})

    def do_POST(self) -> None:  # noqa: N802
        ledger, what = self._route()
        length = int(self.headers.get("Content-Length") or 0)
        if ledger is None or length > MAX_BODY:
            return self._answer(404 if ledger is None else 413, {"error": "refused"})
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
            if what == "actions":
                done = record_action(
                    ledger, str(body["key"]), str(body["action"]), str(body.get("detail", ""))
                )
                return self._answer(200, {"done": done})
            if what == "once":
                first = fire_once(ledger, str(body["run_id"]), str(body["switch"]))
                return self._answer(200, {"first": first})
        except (ValueError, KeyError, TypeError) as error:
            return self._answer(400, {"error": str(error)})
        self._answer(404, {"error": f"no such thing as {what}"})

    def _route(self) -> tuple[Path | None, str]:
        parts = self.path.split("?", 1)[0].strip("/").split("/")
        if len(parts) != 3 or parts[0] != "ledgers":
            return None, ""
        return _ledgers.get(parts[1]), parts[2]

    def _answer(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the ledger itself is the record."""


def _serve() -> ThreadingHTTPServer:
    global _server
    with _starting:
        if _server is None:
            server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
            server.daemon_threads = True
            # Served to agents on purpose: a worker in this process lets specs list it.
            serve_to_agents(server.server_address[1])
            threading.Thread(target=server.serve_forever, name="outside-world", daemon=True).start()
            _server = server
        return _server
