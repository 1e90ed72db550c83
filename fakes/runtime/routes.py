"""The sandbox routes of the fake Runtime API: create, list, get (and `waitFor`), delete, and
the lifecycle verbs `:pause`, `:stop`, `:wake`, `:extend`, `:retention` (`{"days": 1..365}`:
how long a paused sandbox is kept before Runtime deletes it, counted from the call or a later
`:pause`), `:update`
(its `labels` only: the given labels replace those of the same names; any other field is
refused as not faked).

Everything a sandbox does is delegated to a `SandboxProvider` (the local provider), so the
`runtime` provider tested through this fake runs the same engine the `local` provider does;
names, leases and wakes are the fake's own (`sandboxes.Sandboxes`).
"""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any

from activities.providers.protocol import SandboxProvider, SandboxRequest, WorkerMount
from fakes.runtime.http import (
    Request,
    Response,
    Route,
    RouteTable,
    error_response,
    json_response,
)
from fakes.runtime.network_rules import NetworkRules, network_problems
from fakes.runtime.rules import (
    DEFAULT_LEASE_SECONDS,
    Rules,
    create_problems,
    lease_problems,
)
from fakes.runtime.sandboxes import (
    ENDLESS_LEASE_SECONDS,
    SHOWN_FIELDS,
    Record,
    Sandboxes,
    lease_left,
    new_id,
)

SANDBOX = r"^/v1/sandboxes/([^/:]+)"
# `:extend` may move the lease end at most this far ahead of now (with a little slack).
MAX_AHEAD_SECONDS = 3600
AHEAD_SLACK_SECONDS = 2


def refusal(status: int, code: str, problems: list[tuple[str, str]]) -> Response:
    fields = [name for name, _ in problems]
    message = " ".join(text for _, text in problems)
    return error_response(status, code, message, details={"fields": fields, "field": fields[0]})


class SandboxRoutes:
    """Sandboxes and their lifecycle verbs."""

    def __init__(self, engine: SandboxProvider, sandboxes: Sandboxes, rules: Rules) -> None:
        self.engine = engine
        self.sandboxes = sandboxes
        self.rules = rules
        # The snapshot routes (set by the API), for creates with `snapshot`.
        self.snapshots: Any = None
        # What every sandbox is shown of the fake's own (its egress certificate: set by the API).
        self.mounts: tuple[WorkerMount, ...] = ()

    def routes(self) -> RouteTable:
        return [
            Route("POST", re.compile(r"^/v1/sandboxes$"), "create", self._create),
            Route("GET", re.compile(r"^/v1/sandboxes$"), "list", self._list),
            Route("GET", re.compile(SANDBOX + "$"), "get", self._get),
            Route("DELETE", re.compile(SANDBOX + "$"), "delete", self._delete),
            Route("POST", re.compile(SANDBOX + ":pause$"), "pause", self._pause),
            Route("POST", re.compile(SANDBOX + ":stop$"), "stop", self._stop),
            Route("POST", re.compile(SANDBOX + ":wake$"), "wake", self._wake),
            Route("POST", re.compile(SANDBOX + ":extend$"), "extend", self._extend),
            Route("POST", re.compile(SANDBOX + ":retention$"), "retention", self._retention),
            Route("POST", re.compile(SANDBOX + ":update$"), "update", self._update),
        ]

    async def _create(self, request: Request, _: list[str]) -> Response:
        body = request.json()
        problems = create_problems(body, self.rules)
        if problems:
            return refusal(400, "invalid_request", problems)
        if self.snapshots is not None:
            refused: Response | None = self.snapshots.problems(body)
            if refused is not None:
                return refused
        name: str | None = body.get("name")
        async with self.sandboxes.create_lock:  # two creates of one name: one sandbox
            held = await self.sandboxes.holder(name) if name else None
            if held is not None:
                record, info = held
                if not body.get("getOrCreate"):
                    return error_response(409, "name_taken", f"A sandbox is already named {name}.")
                if info.state == "paused":
                    info = await self.sandboxes.wake(record, "POST /v1/sandboxes (get_or_create)")
                return json_response(self.sandboxes.json(record, info, reused=True))
            timeout = float(body.get("timeoutSeconds", DEFAULT_LEASE_SECONDS))
            what = "Creating a sandbox"
            await self.sandboxes.spend(
                int(body.get("vcpu", 2)), int(body.get("memoryMiB", 4096)), timeout, what
            )
            record = await self._new(body, name)
        info = (await self.sandboxes.get(record.id))[1]
        return json_response(self.sandboxes.json(record, info, reused=False), 201)

    async def _new(self, body: dict[str, Any], name: str | None) -> Record:
        timeout = float(body.get("timeoutSeconds", DEFAULT_LEASE_SECONDS))
        snapshot = body.get("snapshot")
        kept = self.snapshots.labels_for(body) if snapshot is not None else None
        record = Record(
            id=new_id(name),
            name=name,
            labels=kept if kept is not None else dict(body.get("labels") or {}),
            created_at=time.time(),
            timeout_seconds=timeout,
            on_lease_end=str(body.get("onLeaseEnd", "pause")),
            auto_wake=bool(body.get("autoWake", True)),
            vcpu=int(body.get("vcpu", 2)),
            memory_mib=int(body.get("memoryMiB", 4096)),
            max_total_cost_micros=body.get("maxTotalCostMicros"),
            shown={k: body[k] for k in SHOWN_FIELDS if k in body},
        )
        # Not carried over from a snapshot: the docs promise only its labels (and not its env).
        if body.get("network") is not None and not network_problems(body["network"]):
            record.network = NetworkRules.from_body(body["network"])
        await self.engine.get_or_create(
            SandboxRequest(
                name=record.id,
                labels=record.labels,
                # The engine ends the lease (pause, or stop with "lease_expired").
                timeout_seconds=timeout if self.rules.leases_end else ENDLESS_LEASE_SECONDS,
                vcpu=record.vcpu,
                memory_mib=record.memory_mib,
                disk_mib=None if body.get("diskMiB") is None else int(body["diskMiB"]),
                on_lease_end="stop" if record.on_lease_end == "stop" else "pause",
                snapshot_id=None if snapshot is None else self.snapshots.copy_of(snapshot),
                # A cloud sandbox reaches the internet, which is the loopback here.
                network="host",
                mounts=self.mounts,
            )
        )
        if snapshot is not None:
            await self.snapshots.restart_processes(snapshot, record.id)
        self.sandboxes.add(record)
        return record

    async def _list(self, request: Request, _: list[str]) -> Response:
        labels = dict(item.split(":", 1) for item in request.query.get("label", []))
        include_stopped = request.arg("includeStopped") == "true"
        states = set(request.query.get("state", []))
        data = []
        for found in await self.engine.list(labels, include_stopped=include_stopped):
            record = self.sandboxes.records.get(found.sandbox_id)
            if record is None:
                record = (await self.sandboxes.get(found.sandbox_id))[0]
            if record.deleted or (states and found.state not in states):
                continue
            if request.arg("name") not in (None, record.name):
                continue
            data.append(self.sandboxes.json(record, found))
        return json_response({"data": data, "nextCursor": None})

    async def _get(self, request: Request, groups: list[str]) -> Response:
        record, info = await self.sandboxes.get(groups[0])
        wanted = request.arg("waitFor")
        asked = float(request.arg("timeoutSeconds") or 60)
        until = time.monotonic() + max(0.0, min(asked, self.rules.max_hold_seconds))
        # Held until the state is reached, cannot be reached any more (stopped), or time is up.
        while wanted and info.state not in (wanted, "stopped") and time.monotonic() < until:
            await asyncio.sleep(self.rules.poll_seconds)
            record, info = await self.sandboxes.get(groups[0])
        return json_response(self.sandboxes.json(record, info))

    async def _delete(self, request: Request, groups: list[str]) -> Response:
        record = self.sandboxes.records.get(groups[0])
        if record is None or not record.deleted:
            record, _ = await self.sandboxes.get(groups[0])
            self.sandboxes.observe(record, await self.engine.stop(record.id))
            record.deleted = True
        # Deleting again answers the same.
        return json_response({"id": record.id, "status": "deleted", "state": "stopped"})

    async def _pause(self, request: Request, groups: list[str]) -> Response:
        record, _ = await self.sandboxes.get(groups[0])
        info = await self.engine.pause(record.id)
        self.sandboxes.observe(record, info)
        if record.retention_days is not None:
            # Kept its retention days from this pause, or from the call if that is later.
            ahead = time.time() + record.retention_days * 86400
            record.kept_until = max(record.kept_until or ahead, ahead)
        return json_response(self.sandboxes.json(record, info))

    async def _stop(self, request: Request, groups: list[str]) -> Response:
        record, _ = await self.sandboxes.get(groups[0])
        info = await self.engine.stop(record.id)
        self.sandboxes.observe(record, info)
        return json_response(self.sandboxes.json(record, info))

    async def _wake(self, request: Request, groups: list[str]) -> Response:
        record, info = await self.sandboxes.get(groups[0])
        body = request.json() or {}
        problems = lease_problems(body, self.rules)
        if problems:
            return refusal(400, "invalid_request", problems)
        if info.state == "stopped":
            return error_response(409, "sandbox_stopped", f"Sandbox {record.id} is stopped.")
        if info.state != "paused":
            if self.rules.refuse_needless_wake:
                return error_response(409, "not_paused", f"Sandbox {record.id} is {info.state}.")
            return json_response(self.sandboxes.json(record, info))
        timeout = body.get("timeoutSeconds")
        why = f"{request.method} {request.path}"
        info = await self.sandboxes.wake(record, why, None if timeout is None else float(timeout))
        return json_response(self.sandboxes.json(record, info))

    async def _extend(self, request: Request, groups: list[str]) -> Response:
        record, info = await self.sandboxes.get(groups[0])
        seconds = (request.json() or {}).get("seconds")
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds <= 0:
            return refusal(400, "invalid_request", [("seconds", "seconds must be positive.")])
        if info.state == "stopped":
            return error_response(409, "sandbox_stopped", f"Sandbox {record.id} is stopped.")
        left = lease_left(info)
        if left is not None:
            ahead = left + seconds
            if self.rules.extend_limit and ahead > MAX_AHEAD_SECONDS + AHEAD_SLACK_SECONDS:
                message = (
                    f"A lease may end at most an hour ({MAX_AHEAD_SECONDS} s) ahead of now; "
                    f"this one would end {int(ahead)} s ahead."
                )
                return refusal(400, "invalid_request", [("seconds", message)])
            what = f"Extending {record.id} by {seconds} s"
            await self.sandboxes.spend(record.vcpu, record.memory_mib, float(seconds), what)
            info = await self.engine.extend(record.id, float(seconds))
            self.sandboxes.observe(record, info)
        return json_response(self.sandboxes.json(record, info))

    async def _retention(self, request: Request, groups: list[str]) -> Response:
        record, info = await self.sandboxes.get(groups[0])
        body = request.json() or {}
        problems = [(name, f"Unknown field {name}.") for name in sorted(body) if name != "days"]
        days = body.get("days")
        if isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= 365:
            problems.append(("days", "days must be a whole number from 1 to 365."))
        if problems or not isinstance(days, int):
            return refusal(400, "invalid_request", problems)
        if info.state == "stopped":
            return error_response(409, "sandbox_stopped", f"Sandbox {record.id} is stopped.")
        record.retention_days = days
        record.kept_until = time.time() + days * 86400
        return json_response(self.sandboxes.json(record, info))

    async def _update(self, request: Request, groups: list[str]) -> Response:
        record, info = await self.sandboxes.get(groups[0])
        body = request.json() or {}
        problems = [(name, f"{name}: not implemented by the fake.") for name in sorted(body)]
        labels = body.get("labels")
        problems = [p for p in problems if p[0] != "labels"]
        if labels is not None and not (
            isinstance(labels, dict)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in labels.items())
        ):
            problems.append(("labels", "labels must map strings to strings."))
        if problems:
            return refusal(400, "invalid_request", problems)
        if labels:
            # Never wakes the sandbox: settings are not a guest call.
            info = await self.engine.set_labels(record.id, labels)
            record.labels = dict(info.labels)
        return json_response(self.sandboxes.json(record, info))
