"""overnight's MCP server for a supervised coding-agent CLI, and the relay it reaches the
adapter through. Standard library only, Python 3.8 or newer, like the kit.

The CLI starts `python3 coding_agent_mcp.py --socket PATH` (Claude Code from `--mcp-config`,
Codex from `[mcp_servers.overnight]` in its config) and speaks MCP to it over stdio: JSON-RPC
2.0, one message a line (`initialize`, `notifications/initialized`, `tools/list`, `tools/call`,
`ping`; Claude Code also probes `server/discover` first, answered "method not found" as MCP
servers of the 2025 protocol do, and it falls back to `initialize`). Its tools:

- `ask_person(question, choices)`: the kit's `ask()`; the run waits paused
  (`waiting_for_answer`) and the tool's result is the answer;
- `wait_until(when, reason)`: the kit's `wait_until()`; the run waits paused until then;
- `report_progress(next, note)`: the checkpoint's `next` and a note, shown in the run's status.

A call is not done here: it is relayed to the adapter (`Relay`, a Unix socket the adapter
listens on, one JSON line each way per call), which does it with the kit in its own process,
so the kit's requests file has one writer. The CLI's tool-call timeout is set high by the
adapter (a question may wait for hours); each call has a thread of its own here.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import socket
import sys
import threading
from collections.abc import Callable
from typing import IO, Any

SERVER_NAME = "overnight"
PROTOCOL_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
MAX_MESSAGE_BYTES = 4 * 1024 * 1024
MAX_RELAY_BYTES = 1024 * 1024

TOOLS: list[dict[str, Any]] = [
    {
        "name": "ask_person",
        "description": (
            "Ask the person who started this run a question, and wait for the answer. The run "
            "is paused until someone answers (it may take hours), then this returns the "
            "answer. Use it only for a decision you cannot make yourself. With choices, the "
            "answer is one of them."
        ),
        "inputSchema": {
            "type": "object",
            "properties": {
                "question": {"type": "string", "description": "The question, self-contained."},
                "choices": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "The possible answers (optional; at most 20).",
                },
            },
            "required": ["question"],
        },
    },
    {
        "name": "wait_until",
        "description": (
            "Pause this run until a time (an API's usage window resets, something outside "
            "finishes). The sandbox is paused meanwhile and costs nothing; this returns when "
            "the time comes, or earlier if the run is woken."
        ),
        "inputSchema": {
            "type": "object",
            "properties": {
                "when": {
                    "type": "string",
                    "description": "ISO 8601 time (no zone: UTC) or epoch seconds.",
                },
                "reason": {"type": "string", "description": "Why, shown in the status."},
            },
            "required": ["when"],
        },
    },
    {
        "name": "report_progress",
        "description": (
            "Tell the people watching this run what you are doing next and a short note; "
            "shown in the run's status. Returns at once."
        ),
        "inputSchema": {
            "type": "object",
            "properties": {
                "next": {"type": "string", "description": "What you are doing next."},
                "note": {"type": "string", "description": "A short note of what was done."},
            },
        },
    },
]
TOOL_NAMES = {tool["name"] for tool in TOOLS}


# --- the relay: the adapter's side ---------------------------------------------------------


class Relay(threading.Thread):
    """The adapter listens on `path`; each call that comes is put on `out` as
    `("mcp", {"tool", "arguments"}, reply)`, and `reply(ok, text)` answers it (once)."""

    def __init__(self, path: str, out: queue.Queue[tuple[Any, ...]]) -> None:
        super().__init__(name="mcp-relay", daemon=True)
        self.path = path
        self.out = out
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(path)
        os.chmod(path, 0o600)
        self.server.listen(16)

    def run(self) -> None:
        while True:
            try:
                connection, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(connection,), daemon=True).start()

    def _serve(self, connection: socket.socket) -> None:
        raw = _read_line(connection, MAX_RELAY_BYTES)
        try:
            request = json.loads(raw.decode("utf-8", "replace")) if raw else None
        except ValueError:
            request = None
        if not isinstance(request, dict):
            connection.close()
            return
        done = threading.Event()

        def reply(ok: bool, text: str) -> None:
            if done.is_set():
                return
            done.set()
            try:
                line = json.dumps({"ok": bool(ok), "text": str(text)}) + "\n"
                connection.sendall(line.encode("utf-8"))
            except OSError:
                pass
            finally:
                connection.close()

        self.out.put(("mcp", request, reply))

    def close(self) -> None:
        try:
            self.server.close()
        finally:
            try:
                os.unlink(self.path)
            except OSError:
                pass


def _read_line(connection: socket.socket, most: int) -> bytes:
    data = b""
    while b"\n" not in data and len(data) <= most:
        try:
            chunk = connection.recv(65536)
        except OSError:
            return b""
        if not chunk:
            break
        data += chunk
    return data.split(b"\n", 1)[0] if len(data) <= most else b""


def relay_call(path: str, tool: str, arguments: dict[str, Any]) -> tuple[bool, str]:
    """Hand one call to the adapter and wait for its answer (however long a person takes)."""
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        connection.connect(path)
    except OSError as error:
        connection.close()
        return False, f"overnight's adapter cannot be reached ({error}): the call was not made"
    try:
        line = json.dumps({"tool": tool, "arguments": arguments}) + "\n"
        connection.sendall(line.encode("utf-8"))
        raw = _read_line(connection, MAX_RELAY_BYTES)
    finally:
        connection.close()
    try:
        answer = json.loads(raw.decode("utf-8", "replace")) if raw else None
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        return False, "overnight's adapter ended before it answered: the call may not be done"
    return bool(answer.get("ok")), str(answer.get("text", ""))


# --- the MCP server: the CLI's side --------------------------------------------------------


class Server:
    def __init__(self, relay: Callable[[str, dict[str, Any]], tuple[bool, str]], out: IO[str]):
        self.relay = relay
        self.out = out
        self._lock = threading.Lock()

    def send(self, message: dict[str, Any]) -> None:
        text = json.dumps(message, separators=(",", ":")) + "\n"
        with self._lock:
            self.out.write(text)
            self.out.flush()

    def handle(self, message: Any) -> None:
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            return
        method = message.get("method")
        if "id" not in message:
            return  # a notification (initialized, cancelled, ...): nothing to answer
        ident = message["id"]
        if not isinstance(method, str):
            return  # an answer to a request of ours: we send none
        params = message.get("params") if isinstance(message.get("params"), dict) else {}
        if method == "initialize":
            asked = str((params or {}).get("protocolVersion", ""))
            version = asked if asked in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[1]
            self.send(
                {
                    "jsonrpc": "2.0",
                    "id": ident,
                    "result": {
                        "protocolVersion": version,
                        "capabilities": {"tools": {"listChanged": False}},
                        "serverInfo": {"name": SERVER_NAME, "version": "1"},
                        "instructions": (
                            "overnight supervises this run: ask_person asks the person who "
                            "started it (the run waits paused), wait_until pauses it until a "
                            "time, report_progress says what you are doing."
                        ),
                    },
                }
            )
        elif method == "ping":
            self.send({"jsonrpc": "2.0", "id": ident, "result": {}})
        elif method == "tools/list":
            self.send({"jsonrpc": "2.0", "id": ident, "result": {"tools": TOOLS}})
        elif method == "tools/call":
            threading.Thread(target=self._call, args=(ident, params or {}), daemon=True).start()
        else:
            self.send(
                {
                    "jsonrpc": "2.0",
                    "id": ident,
                    "error": {"code": -32601, "message": f"method not found: {method}"},
                }
            )

    def _call(self, ident: Any, params: dict[str, Any]) -> None:
        name = str(params.get("name", ""))
        arguments = params.get("arguments")
        if name not in TOOL_NAMES:
            ok, text = False, f"no such tool: {name}"
        else:
            ok, text = self.relay(name, arguments if isinstance(arguments, dict) else {})
        result = {"content": [{"type": "text", "text": text}], "isError": not ok}
        self.send({"jsonrpc": "2.0", "id": ident, "result": result})


def serve(stdin: IO[bytes], server: Server) -> None:
    """Read messages a line at a time until stdin ends (the CLI gone); a line over
    MAX_MESSAGE_BYTES is dropped."""
    while True:
        line = stdin.readline(MAX_MESSAGE_BYTES + 1)
        if not line:
            return
        if len(line) > MAX_MESSAGE_BYTES:
            while line and not line.endswith(b"\n"):  # the rest of the overlong line
                line = stdin.readline(MAX_MESSAGE_BYTES)
            continue
        try:
            message = json.loads(line.decode("utf-8", "replace"))
        except ValueError:
            server.send(
                {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "parse error"}}
            )
            continue
        for one in message if isinstance(message, list) else [message]:
            server.handle(one)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="overnight's MCP server for a coding agent")
    parser.add_argument("--socket", required=True, help="the adapter's relay socket")
    args = parser.parse_args(argv)
    server = Server(lambda tool, arguments: relay_call(args.socket, tool, arguments), sys.stdout)
    serve(sys.stdin.buffer, server)
    return 0


if __name__ == "__main__":
    sys.exit(main())
