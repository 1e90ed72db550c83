"""The fake Runtime API's request pipeline: what Runtime's API adds around a sandbox engine.

Each request is logged, its bearer key checked (401), armed faults applied, a silenced
sandbox's routes held, a repeated Idempotency-Key answered from memory (per route), and a
paused sandbox woken when its guest is touched; then it is routed, and engine failures are
answered in Runtime's error shape.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Awaitable, Callable

from activities.provider import ProviderError, SandboxNotFound, SandboxNotRunning, SandboxProvider
from tests.fake_runtime.faults import Faults
from tests.fake_runtime.files import FileRoutes
from tests.fake_runtime.http import Request, Response, error_response
from tests.fake_runtime.routes import SandboxRoutes

_SANDBOX_PATH = re.compile(r"^/v1/sandboxes/([^/:]+)")
# Routes served by a sandbox's guest: touching them on a paused sandbox wakes it on Runtime.
_GUEST_PATH = re.compile(r"^/v1/sandboxes/([^/:]+)(:exec|/processes|/files|/uploads)")


class RuntimeApi:
    """One fake Runtime account: its keys, its sandboxes (in the engine) and its memory."""

    def __init__(
        self,
        engine: SandboxProvider,
        faults: Faults,
        api_keys: set[str],
        wake: Callable[[str], Awaitable[None]] | None = None,
    ) -> None:
        self.engine = engine
        self.faults = faults
        self.api_keys = api_keys
        self.sandboxes = SandboxRoutes(engine, wake)
        self.lock = self.sandboxes.lock
        self.log: list[Request] = []
        self._answers: dict[tuple[str, str, str], Response] = {}
        self._key_locks: dict[tuple[str, str, str], asyncio.Lock] = {}
        self._routes = self.sandboxes.routes() + FileRoutes(engine).routes()

    @property
    def wakes(self) -> list[tuple[str, str]]:
        return self.sandboxes.wakes

    async def handle(self, request: Request) -> Response:
        with self.lock:
            self.log.append(request)
        key = request.headers.get("authorization", "").removeprefix("Bearer ")
        if key not in self.api_keys:
            return error_response(401, "unauthorized", "The API key is not valid.")
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
        found = _SANDBOX_PATH.match(request.path)
        while found and self.faults.is_silent(found.group(1)):
            await asyncio.sleep(0.05)
        response = await self._answer(request)
        if fault is not None and fault.action == "lose":
            # The work is done (and remembered under its key), but the answer never arrives.
            return Response(drop=True)
        return response

    async def _answer(self, request: Request) -> Response:
        """Route the request; a non-GET with an Idempotency-Key is answered once per route."""
        idempotency_key = request.headers.get("idempotency-key")
        if request.method == "GET" or not idempotency_key:
            return await self._route(request)
        slot = (request.method, request.path, idempotency_key)
        lock = self._key_locks.setdefault(slot, asyncio.Lock())
        async with lock:
            if slot in self._answers:
                return _copy(self._answers[slot])
            response = await self._route(request)
            if response.status >= 500:
                return response
            if response.stream is not None:
                response.stream = _remember(
                    response.stream, response, lambda done: self._answers.update({slot: done})
                )
            else:
                self._answers[slot] = _copy(response)
            return response

    async def _route(self, request: Request) -> Response:
        for method, pattern, route in self._routes:
            match = pattern.match(request.path)
            if match and method == request.method:
                try:
                    guest = _GUEST_PATH.match(request.path)
                    if guest:
                        await self._touch(guest.group(1), request)
                    return await route(request, list(match.groups()))
                except SandboxNotFound:
                    return error_response(404, "not_found", "No such sandbox.")
                except SandboxNotRunning as error:
                    code = "sandbox_paused" if error.state == "paused" else "not_running"
                    return error_response(409, code, str(error))
                except ProviderError as error:
                    status = 500 if error.retryable else 400
                    return error_response(status, error.kind, str(error))
                except (ValueError, KeyError, TypeError) as error:
                    return error_response(400, "invalid_request", str(error))
        return error_response(404, "not_found", f"No route for {request.method} {request.path}.")

    async def _touch(self, sandbox_id: str, request: Request) -> None:
        info = await self.sandboxes.info(sandbox_id)
        if info.state == "paused":
            await self.sandboxes.wake(sandbox_id, f"{request.method} {request.path}")


def _copy(response: Response) -> Response:
    return Response(response.status, response.body, dict(response.headers))


async def _remember(
    stream: AsyncIterator[bytes], response: Response, store: Callable[[Response], None]
) -> AsyncIterator[bytes]:
    """Pass a stream through, then keep it whole so a retry with the same key replays it."""
    pieces: list[bytes] = []
    async for piece in stream:
        pieces.append(piece)
        yield piece
    store(Response(response.status, b"".join(pieces), dict(response.headers)))
