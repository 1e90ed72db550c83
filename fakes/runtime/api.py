"""The fake Runtime API's request pipeline: what Runtime's API adds around a sandbox engine.

Each request is logged and counted (by route and sandbox), its bearer key checked (401), held
to the key's rate limit (429 `rate_limited` with `Retry-After` after waiting its turn up to
5 s), armed faults applied, a silenced sandbox's routes held, a repeated Idempotency-Key
answered from memory (per route), and a guest call to a paused sandbox wakes it (a stopped
one has no disk: 409 `sandbox_stopped`; one whose fresh lease is past the account's limits
stays paused: 402); then it is routed, and engine failures and money refusals
(`money.SpendingRefused`, 402) are answered in Runtime's error shape.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace

from activities.providers.protocol import (
    ProviderError,
    SandboxNotFound,
    SandboxNotRunning,
    SandboxProvider,
)
from fakes.runtime.commands import CommandRoutes
from fakes.runtime.events import EventRoutes
from fakes.runtime.faults import Faults
from fakes.runtime.files import FileRoutes
from fakes.runtime.guest_network import GuestNetwork
from fakes.runtime.http import Request, Response, Route, error_response
from fakes.runtime.money import Billing, SpendingRefused
from fakes.runtime.money_routes import MoneyRoutes
from fakes.runtime.network import NetworkRoutes
from fakes.runtime.routes import SandboxRoutes
from fakes.runtime.rules import Rules
from fakes.runtime.sandboxes import Sandboxes
from fakes.runtime.snapshots import SnapshotRoutes
from fakes.runtime.traffic import RateLimiter, Served, Tracked, Traffic, seconds_header
from fakes.runtime.watches import WatchRoutes

log = logging.getLogger(__name__)
_SANDBOX_PATH = re.compile(r"^/v1/sandboxes/([^/:]+)")


class RuntimeApi:
    """One fake Runtime account: its keys, its sandboxes (in the engine) and its memory."""

    def __init__(
        self,
        engine: SandboxProvider,
        faults: Faults,
        api_keys: set[str],
        wake: Callable[[str], Awaitable[None]] | None = None,
        rules: Rules | None = None,
        billing: Billing | None = None,
        network: GuestNetwork | None = None,
    ) -> None:
        self.engine = engine
        # Egress secrets and the proxy that puts them in (`guest_network`); its proxy is
        # started by the server.
        self.network = network if network is not None else GuestNetwork()
        self.faults = faults
        self.api_keys = api_keys
        self.rules = rules or Rules()
        self.sandboxes = Sandboxes(engine, self.rules, wake, billing)
        self.lock = self.sandboxes.lock
        self.log: list[Request] = []
        self.traffic = Traffic()
        self.watches = WatchRoutes(engine, self.sandboxes, self.rules)
        self.files = FileRoutes(engine)
        self._limiters: dict[str, RateLimiter] = {}
        self._answers: dict[tuple[str, str, str], Response] = {}
        self._key_locks: dict[tuple[str, str, str], asyncio.Lock] = {}
        sandbox_routes = SandboxRoutes(engine, self.sandboxes, self.rules)
        sandbox_routes.mounts = self.network.mounts()
        commands = CommandRoutes(engine, self.sandboxes, self.rules)
        commands.guest_env = self.network.env
        self.commands = commands
        self.snapshots = SnapshotRoutes(engine, self.sandboxes, self.rules, commands)  # type: ignore[arg-type]
        sandbox_routes.snapshots = self.snapshots
        self._routes = (
            sandbox_routes.routes()
            + commands.routes()
            + self.snapshots.routes()
            + self.files.routes()
            + self.watches.routes()
            + MoneyRoutes(self.sandboxes).routes()
            + NetworkRoutes(self.sandboxes).routes()
            + EventRoutes(self.sandboxes.events).routes()
            + self.network.secrets.routes()
        )

    @property
    def wakes(self) -> list[tuple[str, str]]:
        return self.sandboxes.wakes

    def _find(self, request: Request) -> tuple[Route, list[str]] | None:
        for route in self._routes:
            match = route.pattern.match(request.path)
            if match and route.method == request.method:
                return route, list(match.groups())
        return None

    async def handle(self, request: Request) -> Response:
        found = self._find(request)
        route = found[0].name if found else "unknown"
        with self.lock:
            # An upload's parts are logged without their bytes (counted in `bytes_received`):
            # a CLI upload of 400 MB would otherwise stay in the log.
            kept = replace(request, body=b"") if route == "upload_part" else request
            self.log.append(kept)
        in_sandbox = _SANDBOX_PATH.match(request.path)
        served = self.traffic.received(
            Served(
                request.method,
                request.path,
                route,
                in_sandbox.group(1) if in_sandbox else None,
                bytes_received=len(request.body),
            )
        )
        key = _api_key(request)
        if key not in self.api_keys:
            response = error_response(401, "unauthorized", "The API key is not valid.")
            return _counted(response, served, lambda: None)
        limiter = self._limiters.setdefault(key, RateLimiter(self.rules))
        if self.rules.rate_limit:
            wait = await limiter.acquire()
            if wait is not None:
                response = error_response(
                    429,
                    "rate_limited",
                    "Too many requests for this key: slow down.",
                    headers={"retry-after": seconds_header(wait)},
                    retryAfterMs=max(1, round(wait * 1000)),
                    retryable=True,
                )
                return _counted(response, served, lambda: None)
        else:
            limiter.admit_unlimited()
        try:
            response = await self._faulted(request, found)
        except BaseException:
            limiter.release()
            raise
        return _counted(response, served, limiter.release)

    async def _faulted(self, request: Request, found: tuple[Route, list[str]] | None) -> Response:
        fault = self.faults.take(request.method, request.path)
        if fault is not None:
            if fault.action == "drop":
                return Response(drop=True)
            if fault.action == "hang":
                await asyncio.Event().wait()
            await asyncio.sleep(fault.delay)
            if fault.action == "status":
                headers = (
                    {} if fault.retry_after is None else {"retry-after": str(fault.retry_after)}
                )
                return error_response(
                    fault.status, fault.code, "Injected failure.", headers=headers, **fault.extra
                )
        in_sandbox = _SANDBOX_PATH.match(request.path)
        while in_sandbox and self.faults.is_silent(in_sandbox.group(1)):
            await asyncio.sleep(0.05)
        response = await self._answer(request, found)
        if fault is not None and fault.action == "lose":
            # The work is done (and remembered under its key), but the answer never arrives.
            return Response(drop=True)
        return response

    async def _answer(self, request: Request, found: tuple[Route, list[str]] | None) -> Response:
        """Route the request; a non-GET with an Idempotency-Key is answered once per route."""
        idempotency_key = request.headers.get("idempotency-key")
        if request.method == "GET" or not idempotency_key:
            return await self._route(request, found)
        slot = (request.method, request.path, idempotency_key)
        lock = self._key_locks.setdefault(slot, asyncio.Lock())
        async with lock:
            if slot in self._answers:
                return _copy(self._answers[slot])
            response = await self._route(request, found)
            if response.status >= 500:
                return response
            if response.stream is not None:
                response.stream = _remember(
                    response.stream, response, lambda done: self._answers.update({slot: done})
                )
            else:
                self._answers[slot] = _copy(response)
            return response

    async def _route(self, request: Request, found: tuple[Route, list[str]] | None) -> Response:
        if found is None:
            return error_response(
                404, "not_found", f"No route for {request.method} {request.path}."
            )
        route, groups = found
        try:
            in_sandbox = _SANDBOX_PATH.match(request.path)
            if route.guest and in_sandbox:  # (an upload part's groups name the upload only)
                refused = await self._touch(in_sandbox.group(1), request)
                if refused is not None:
                    return refused
            return await route.handler(request, groups)
        except SandboxNotFound:
            return error_response(404, "not_found", "No such sandbox.")
        except SpendingRefused as refused:
            return error_response(
                402, refused.code, refused.message, hint=refused.hint, details=refused.details
            )
        except SandboxNotRunning as error:
            code = "sandbox_paused" if error.state == "paused" else "not_running"
            return error_response(409, code, str(error))
        except ProviderError as error:
            status = 500 if error.retryable else 400
            return error_response(status, error.kind, str(error))
        except (ValueError, KeyError, TypeError) as error:
            return error_response(400, "invalid_request", str(error))
        except Exception as error:  # noqa: BLE001 - a bug behind the API is a 500, not a cut
            log.exception("%s %s failed", request.method, request.path)
            return error_response(500, "internal_error", f"{type(error).__name__}: {error}")

    async def _touch(self, sandbox_id: str, request: Request) -> Response | None:
        """A guest call: a paused sandbox wakes (or refuses), a stopped one has no disk."""
        record, info = await self.sandboxes.get(sandbox_id)
        if info.state == "stopped" and self.rules.refuse_stopped_guest:
            return error_response(409, "sandbox_stopped", f"Sandbox {sandbox_id} is stopped.")
        if info.state == "paused":
            if not (self.rules.wake_on_request and record.auto_wake):
                return error_response(409, "sandbox_paused", f"Sandbox {sandbox_id} is paused.")
            why = f"{request.method} {request.path}"
            await self.sandboxes.wake(record, why, key=_api_key(request))
        return None


def _api_key(request: Request) -> str:
    return request.headers.get("authorization", "").removeprefix("Bearer ")


def _counted(response: Response, served: Served, release: Callable[[], None]) -> Response:
    """Record the answer in `served`; `release` the request's slot once it is all sent."""
    served.status = 0 if response.drop else response.status
    served.headers = dict(response.headers)
    if response.stream is None:
        served.bytes_sent, served.done = len(response.body), True
        release()
        return response

    def piece(data: bytes) -> None:
        served.bytes_sent += len(data)

    def done() -> None:
        served.done = True
        release()

    response.stream = Tracked(response.stream, piece, done)
    return response


def _copy(response: Response) -> Response:
    return Response(response.status, response.body, dict(response.headers))


async def _remember(
    stream: AsyncIterator[bytes], response: Response, store: Callable[[Response], None]
) -> AsyncIterator[bytes]:
    """Pass a stream through, then keep it whole so a retry with the same key replays it."""
    pieces: list[bytes] = []
    try:
        async for piece in stream:
            pieces.append(piece)
            yield piece
    finally:
        close = getattr(stream, "aclose", None)
        if close is not None:
            await close()
    store(Response(response.status, b"".join(pieces), dict(response.headers)))
