"""What a test may ask the running fake: what it received, what it sent, and its leases.

Route names (the `route=` of the counters): create, list, get, delete, pause, stop, wake,
extend, retention; exec, spawn, processes, process, output; stat, read (file content
downloads), write, chmod, unarchive, upload, upload_part, upload_end; watch_start,
watch_list, watch_stop, watch_events; usage, limits (`GET /v1/usage`, `GET /v1/limits`);
network, network_set (`GET`, `PUT /v1/sandboxes/{id}/network`); egress_secret_set,
egress_secrets, egress_secret_delete (`PUT`, `GET`, `DELETE /v1/egress-secrets[/{name}]`);
"unknown" for a path no route serves.
"""

from __future__ import annotations

import asyncio
import re
import time
from datetime import UTC, datetime

from activities.providers.local.engine import LocalEngine
from activities.providers.local.provider import LocalProvider
from fakes.runtime.api import RuntimeApi
from fakes.runtime.http import Request
from fakes.runtime.network import rules_shown
from fakes.runtime.traffic import Served


class Inspection:
    """Mixed into `FakeRuntime`. Safe to call from the test's thread while the fake runs."""

    _api: RuntimeApi | None
    _loop: asyncio.AbstractEventLoop | None

    @property
    def api(self) -> RuntimeApi:
        assert self._api is not None, "the fake is not running"
        return self._api

    def requests(self, method: str | None = None, path: str | None = None) -> list[Request]:
        """Requests received, oldest first; `path` is a regular expression searched in the path."""
        with self.api.lock:
            log = list(self.api.log)
        return [
            r
            for r in log
            if (method is None or r.method == method) and (path is None or re.search(path, r.path))
        ]

    @property
    def wakes(self) -> list[tuple[str, str]]:
        """Each wake of a paused sandbox, oldest first: (sandbox id, what woke it), where what
        woke it is the request ("GET /v1/sandboxes/x/files/stat", "POST /v1/sandboxes/x:wake",
        "POST /v1/sandboxes (get_or_create)")."""
        with self.api.lock:
            return list(self.api.wakes)

    def wakes_by(self, api_key: str) -> list[tuple[str, str]]:
        """The `wakes` a guest call made with `api_key` caused (see `FakeRuntime.add_key`)."""
        with self.api.lock:
            woken = list(self.api.sandboxes.woken)
        return [(sandbox_id, why) for sandbox_id, why, key in woken if key == api_key]

    def served(self) -> list[Served]:
        """Every request as counted: route, sandbox, status, answer headers, body bytes sent."""
        return self.api.traffic.snapshot()

    def request_count(
        self, sandbox_id: str | None = None, route: str | None = None, status: int | None = None
    ) -> int:
        """Requests received (refused ones too), for one sandbox, route or answer status."""
        return self.api.traffic.count(sandbox_id, route, status)

    def bytes_sent(self, route: str | None = None, sandbox_id: str | None = None) -> int:
        """Response body bytes sent, e.g. `bytes_sent(route="read")` for file downloads."""
        return self.api.traffic.bytes_sent(route, sandbox_id)

    def bytes_received(self, route: str | None = None, sandbox_id: str | None = None) -> int:
        """Request body bytes received, e.g. `bytes_received(route="upload_part")`."""
        return self.api.traffic.bytes_received(route, sandbox_id)

    def counts_by_route(self, sandbox_id: str | None = None) -> dict[str, int]:
        """Requests received per route name (for one sandbox, or all)."""
        return self.api.traffic.by_route(sandbox_id)

    def sandbox_named(self, name: str) -> str | None:
        """The id of the sandbox that last took `name` (it may have stopped since)."""
        with self.api.lock:
            return self.api.sandboxes.names.get(name)

    def retention_days(self, sandbox_id: str) -> int | None:
        """The days `:retention` last set on the sandbox (None: never set)."""
        with self.api.lock:
            return self.api.sandboxes.records[sandbox_id].retention_days

    def end_retention(self, sandbox_id: str) -> None:
        """Let the sandbox's retention pass (what days of waiting would do): paused, it is
        deleted at the next look, as Runtime deletes it."""
        with self.api.lock:
            self.api.sandboxes.records[sandbox_id].kept_until = time.time() - 1

    def network_rules(self, sandbox_id: str) -> dict[str, object]:
        """The sandbox's network rules as `GET /v1/sandboxes/{id}/network` answers them."""
        with self.api.lock:
            return rules_shown(self.api.sandboxes.records[sandbox_id])

    def egress_verdict(self, sandbox_id: str, host: str, port: int = 443) -> str | None:
        """What Runtime's proxy would answer the sandbox's connection to `host:port` under its
        rules: the refusal's word (`X-Runtime-Egress: rule-not-allowed`, `internet-off`; the
        fake's `private-address` for the addresses Runtime refuses to every sandbox), or None
        when it would let it through. The fake's sandboxes are not held to it (see
        `fakes.runtime.network`)."""
        with self.api.lock:
            return self.api.sandboxes.records[sandbox_id].network.verdict(host, port)

    def _engine(self) -> LocalEngine:
        engine = self.api.engine
        assert isinstance(engine, LocalProvider), "leases live in the local engine"
        return engine.engine

    def lease_ends_at(self, sandbox_id: str) -> datetime | None:
        """When the sandbox's lease ends (None: no time limit)."""
        deadline = self._engine().get(sandbox_id).deadline
        return None if deadline is None else datetime.fromtimestamp(deadline, UTC)

    def end_lease_in(self, sandbox_id: str, seconds: float) -> None:
        """Move the sandbox's lease end to `seconds` from now (what a long wait would do),
        though its client could only ask for 60..3600 s: the lease then ends as Runtime's
        does, pausing the sandbox or stopping it (stopReason "lease_expired")."""
        self._engine().set_lease_end(sandbox_id, time.time() + seconds)
