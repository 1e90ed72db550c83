"""Whose are the host ports a spec lists in `host_ports`: found from the sockets, not a list.

A sandbox reaches the worker's loopback on its `host_ports` (a relay dials 127.0.0.1:PORT), so
a port must never be one that overnight's own machinery listens on. The listening TCP sockets
of the worker's network namespace are read from /proc/net/tcp and tcp6 and mapped to their
processes through /proc/PID/fd. A port is refused when its listener belongs to:

- the Temporal server this worker talks to, when it runs on this machine: the process that
  listens on the frontend's port, and every process of the same program (a cluster's other
  services). Its HTTP API, Web UI and internal ports are refused as its frontend is;
- this worker's own process (its metrics endpoint, an in-process codec server), except the
  ports it serves to agents on purpose (`overnight.core.local_services.serve_to_agents`);
- a process that declared itself one of overnight's services (`local_services.Declared`: the
  codec server, other workers of the same `$OVERNIGHT_HOME`), except the ports its declaration
  says it serves to agents.

A listener the worker cannot see (another user's process under a worker that is not root)
is not refused by this; the frontend's port and the Web UI's beside it always are.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable
from pathlib import Path

from overnight.core.local_services import declarations, served_to_agents

_LISTEN = "0A"
_LOOPBACK = ("localhost", "127.0.0.1", "::1", "0.0.0.0", "::")
# The fixed pair of the old guard: what no socket needs to be seen for.
FIXED_OWNER = "the port of the Temporal server this worker talks to (or its Web UI)"


def listening(tables: Iterable[str] = ("/proc/net/tcp", "/proc/net/tcp6")) -> dict[int, set[int]]:
    """port -> the inodes of the TCP sockets listening on it, on any address."""
    found: dict[int, set[int]] = {}
    for table in tables:
        try:
            with open(table) as lines:
                next(lines, None)
                rows = [line.split() for line in lines]
        except OSError:
            continue
        for row in rows:
            if len(row) > 9 and row[3] == _LISTEN:
                port = int(row[1].rsplit(":", 1)[1], 16)
                found.setdefault(port, set()).add(int(row[9]))
    return found


def socket_inodes(pid: int | str) -> set[int]:
    """The inodes of the sockets process `pid` holds (empty when it is gone or not ours)."""
    inodes: set[int] = set()
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return inodes
    for fd in fds:
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(int(link[8:-1]))
    return inodes


def _pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def _exe(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return None


class OwnServices(frozenset[int]):
    """The ports a sandbox must never be given. As a set: the fixed pair (the frontend's port
    on a loopback target, and the Web UI's beside it, port + 1000), which hold even when no
    socket can be seen (a server behind a NAT rule). `owners(ports)` finds the rest from the
    sockets at the moment of the check."""

    target_port: int | None
    home: Path | None
    _server: tuple[frozenset[int], int] | None

    def __new__(cls, target_host: str | None, home: Path | None = None) -> OwnServices:
        port = _loopback_port(target_host)
        self = super().__new__(cls, () if port is None else (port, port + 1000))
        self.target_port = port
        self.home = home
        self._server = None
        return self

    def owners(self, ports: Collection[int]) -> dict[int, str]:
        """port -> whose it is, for each of `ports` one of overnight's processes listens on."""
        listeners = listening()
        asked = {port: listeners[port] for port in ports if port in listeners}
        if not asked:
            return {}
        found: dict[int, str] = {}
        own = os.getpid()
        mine = socket_inodes(own)
        vouched = served_to_agents()
        for port, inodes in asked.items():
            if inodes & mine and port not in vouched:
                found[port] = "a port of this worker's own process (its metrics endpoint, or "
                found[port] += "another service of its)"
        declared = declarations(self.home)
        for pid, who in self._others(listeners, own, declared).items():
            held = socket_inodes(pid)
            meant = declared[pid][1] if pid in declared else frozenset()
            for port, inodes in asked.items():
                if port not in found and port not in meant and inodes & held:
                    found[port] = who
        return found

    def _others(
        self,
        listeners: dict[int, set[int]],
        own: int,
        declared: dict[int, tuple[str, frozenset[int]]],
    ) -> dict[int, str]:
        """pid -> description of the other processes whose ports are refused."""
        others = {
            pid: f"a port of overnight's {kind} (process {pid})"
            for pid, (kind, _) in declared.items()
            if pid != own
        }
        server = self._server_pid(listeners)
        if server is not None:
            exe = _exe(server)
            name = os.path.basename(exe) if exe else "?"
            others[server] = (
                f"a port of the Temporal server this worker talks to (process {server}, {name}: "
                "its frontend, HTTP API, Web UI or an internal service)"
            )
            for pid in _pids() if exe else []:
                if pid not in others and pid != own and _exe(pid) == exe:
                    others[pid] = f"a port of a Temporal server on this machine (process {pid})"
        return others

    def _server_pid(self, listeners: dict[int, set[int]]) -> int | None:
        """The process listening on the frontend's port, when the target is on this machine's
        loopback (remembered by the socket's inode: found once, checked after)."""
        if self.target_port is None or self.target_port not in listeners:
            return None
        inodes = frozenset(listeners[self.target_port])
        if self._server is not None:
            known, pid = self._server
            if known == inodes and inodes & socket_inodes(pid):
                return pid
        for pid in _pids():
            if inodes & socket_inodes(pid):
                self._server = (inodes, pid)
                return pid
        return None


def _loopback_port(target_host: str | None) -> int | None:
    if not target_host:
        return None
    host, _, port = target_host.rpartition(":")
    if host.strip("[]") not in _LOOPBACK or not port.isdigit():
        return None
    return int(port)
