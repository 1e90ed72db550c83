"""overnight's own services on this machine, which no sandbox may reach through `host_ports`.

Two things a worker cannot tell from a socket alone, so the processes say them:

- `Declared(kind)`: while it holds, this process is one of overnight's services (a worker, the
  codec server). A file per process and kind under `$OVERNIGHT_HOME/services/`, with the
  process's start time, so a file left by a process killed (or a reused pid) is ignored.
  Workers refuse every port such a process listens on (activities/admission/loopback_owners.py).
- `serve_to_agents(port)`: this process serves `port` to agents on purpose (the demo's ledger,
  `overnight.demo.outside_world`). The worker in the same process honours it, and so do other
  workers when this process is also a declared service (the ports are in its declaration): a
  test or benchmark process that runs a worker and serves an agent's outside world.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from overnight.core.home import overnight_home

SERVICES_DIR = "services"
_for_agents: set[int] = set()
_declared_here: list[Declared] = []


def serve_to_agents(port: int) -> None:
    """This process listens on `port` for the agents of the specs that list it."""
    _for_agents.add(port)
    for declared in list(_declared_here):
        declared.write()


def served_to_agents() -> frozenset[int]:
    return frozenset(_for_agents)


def start_time(pid: int) -> str | None:
    """When process `pid` started (clock ticks since boot), None when it is gone: with the pid
    it names one process, never a later one given the same pid."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[19].decode() if len(fields) > 19 else None


class Declared:
    """This process is overnight's `kind` service while the block runs (`with` or `async
    with`). A state directory that cannot be written declares nothing (the service still
    runs: workers then know only the ports they find themselves)."""

    def __init__(self, kind: str, home: Path | None = None) -> None:
        pid = os.getpid()
        self._record: dict[str, object] = {"pid": pid, "start": start_time(pid), "kind": kind}
        self._path = (home or overnight_home()) / SERVICES_DIR / f"{pid}.{kind}.json"
        self._written = False

    def write(self) -> None:
        """(Re)write the declaration, with the ports this process now serves to agents."""
        record = {**self._record, "for_agents": sorted(_for_agents)}
        try:
            self._path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self._path.with_name(f".{self._path.name}.tmp")
            tmp.write_text(json.dumps(record))
            tmp.replace(self._path)
            self._written = True
        except OSError:
            pass

    def __enter__(self) -> None:
        _declared_here.append(self)
        self.write()

    def __exit__(self, *_: object) -> None:
        if self in _declared_here:
            _declared_here.remove(self)
        if self._written:
            self._path.unlink(missing_ok=True)
            self._written = False

    async def __aenter__(self) -> None:
        self.__enter__()

    async def __aexit__(self, *_: object) -> None:
        self.__exit__()


def declared_services(home: Path | None = None) -> dict[int, str]:
    """The live processes that declared themselves: pid -> kind (kinds joined by ", ")."""
    return {pid: kind for pid, (kind, _) in declarations(home).items()}


def declarations(home: Path | None = None) -> dict[int, tuple[str, frozenset[int]]]:
    """The live declared processes: pid -> (kind, the ports it serves to agents on purpose)."""
    folder = (home or overnight_home()) / SERVICES_DIR
    try:
        names = os.listdir(folder)
    except OSError:
        return {}
    found: dict[int, tuple[str, frozenset[int]]] = {}
    for name in sorted(names):
        if name.startswith(".") or not name.endswith(".json"):
            continue
        try:
            record = json.loads((folder / name).read_text())
            pid, kind, start = int(record["pid"]), str(record["kind"]), record["start"]
            ports = frozenset(int(port) for port in record.get("for_agents", []))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
        if start is None or start_time(pid) != start:
            continue  # gone, or its pid is another process's now
        if pid in found:
            kind, ports = f"{found[pid][0]}, {kind}", found[pid][1] | ports
        found[pid] = (kind, ports)
    return found
