"""The gateway's model routes: a sandbox's model calls, forwarded with the worker's key and
counted. `/model/v1/messages` (Anthropic Messages), `/model/v1/responses` (OpenAI Responses),
`/model/v1/chat/completions` (OpenAI Chat Completions) and `/model/v1beta/models/{model}:
{method}` (the Gemini API, model_gemini.py), streamed or not.

For each request, in order: the caller's model token (`x-api-key`, `x-goog-api-key` or
`Authorization: Bearer`; the Gemini API's `?key=` too; tokens.py) must name a running sandbox
whose record has a `model` entry (model_origin.py), else 401; a run whose booked spend reached
its cap is refused at once (model_policy.py); the body's SHA-256 is counted for loop evidence;
a streamed Chat Completions request is made to ask for its usage. Then it goes to the upstream
with the worker's credential in the vendor's header (the sandbox's credential headers are never
forwarded: model_request.py), retried there on 429/529/503 while nothing was sent back
(model_policy.py); the answer goes back as it comes, its usage read on the way
(model_usage.py), priced by the worker's table (overnight/core/model_prices.py) and booked to the
run (model_ledger.py) once it ends. Bodies and credentials are never logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from activities.gateway import http_wire, model_forward, model_gemini, model_policy
from activities.gateway.model_ledger import ModelBook
from activities.gateway.model_origin import ModelOrigin
from activities.gateway.model_request import (
    ModelRequest,
    answer_headers,
    model_asked,
    token_of,
    upstream_request,
)
from activities.gateway.model_usage import Api, SseEvents, UsageReader, usage_needle
from activities.gateway.tokens import model_token_owner
from overnight.core.model_prices import PriceTable, dearest, load_prices, price_of, usd_of

logger = logging.getLogger(__name__)

ROUTE = "/model/"
# gateway path -> (api, the vendor's path)
PATHS: dict[str, tuple[Api, str]] = {
    "/model/v1/messages": ("anthropic", "/v1/messages"),
    "/model/v1/responses": ("responses", "/v1/responses"),
    "/model/v1/chat/completions": ("chat", "/v1/chat/completions"),
}
VENDOR_UPSTREAMS: dict[Api, str] = {
    "anthropic": "https://api.anthropic.com",
    "responses": "https://api.openai.com",
    "chat": "https://api.openai.com",
    "generate_content": model_gemini.UPSTREAM,
}
MAX_BODY = 64 * 1024 * 1024
MAX_WHOLE_ANSWER = 32 * 1024 * 1024
MAX_ERROR_BODY = 64 * 1024
IDLE_SECONDS = 120.0


@dataclass
class ModelRoutes:
    key: bytes
    lookup: Callable[[str], ModelOrigin | None]
    book: ModelBook
    environ: Mapping[str, str] = field(default_factory=lambda: os.environ)
    pool: model_forward.Pool = field(default_factory=model_forward.Pool)
    _prices: PriceTable | None = None
    answered: int = 0
    # Connections waiting for their next request, closed when the gateway stops.
    _idle: set[asyncio.StreamWriter] = field(default_factory=set)

    async def serve(
        self,
        method: str,
        target: str,
        headers: list[tuple[str, str]],
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        """Serve requests on one connection (kept open between them, as clients expect)."""
        # An answer's head and body go out in separate writes: without this, the body waits
        # for the client's delayed ACK of the head (40 ms a request on a kept-open connection).
        with contextlib.suppress(OSError, AttributeError):
            writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while True:
            keep = await self._one(method, target, headers, reader, writer)
            if not keep:
                return
            self._idle.add(writer)
            try:
                async with asyncio.timeout(IDLE_SECONDS):
                    head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
                return
            finally:
                self._idle.discard(writer)
            method, target, headers = http_wire.parse_head(head)
            if not target.startswith(ROUTE):
                await _send(writer, 400, [], b"overnight gateway: model routes only here\n", False)
                return

    async def _one(
        self,
        method: str,
        target: str,
        head: list[tuple[str, str]],
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> bool:
        """One request; True when the connection may serve another."""
        headers = {k.lower(): v for k, v in head}
        keep = headers.get("connection", "").lower() != "close"
        url = urlsplit(target)
        route = PATHS.get(url.path.rstrip("/"))
        # Errors before a route is known are in the shape of the API the path is under.
        api: Api = route[0] if route else "chat"
        api = "generate_content" if model_gemini.is_gemini_path(url.path) else api
        try:
            body = await http_wire.read_body(reader, headers, MAX_BODY)
        except http_wire.BodyTooLarge:
            error = model_policy.error_body(api, "request_too_large", "over 64 MiB")
            await _send(writer, 413, [], error, False)
            return False
        request = (
            ModelRequest(route[0], route[1], url.query, headers, body)
            if route
            else model_gemini.gemini_request(url.path, url.query, headers, body)
        )
        if request is None or method != "POST":
            error = model_policy.error_body(api, "not_found_error", f"no route {url.path}")
            await _send(writer, 404, [], error, keep)
            return keep
        token = model_gemini.caller_token(token_of(headers), request, url.query)
        sandbox = model_token_owner(self.key, token)
        origin = None if sandbox is None else self.lookup(sandbox)
        if sandbox is None or origin is None:
            await _send(writer, *model_policy.unauthorized(request.api), keep)
            return keep
        try:
            prices = self._price_table()
        except ValueError as error:
            message = f"overnight gateway: the worker's price table: {error}"
            await _send(
                writer, 500, [], model_policy.error_body(request.api, "api_error", message), keep
            )
            return keep
        if origin.cap_usd is not None:
            spent = self.book.spent(origin.run_id)
            if spent >= origin.cap_usd:
                self.book.refused_at_cap(origin.run_id)
                await _send(
                    writer, *model_policy.cap_reached(request.api, spent, origin.cap_usd), keep
                )
                return keep
        if request.metered:
            self.book.body_seen(origin.run_id, hashlib.sha256(body).hexdigest())
        return await self._forward(request, origin, sandbox, prices, writer, keep)

    async def close(self) -> None:
        """Close the connections kept open, both ways (the gateway stops)."""
        for writer in list(self._idle):
            writer.close()
        for _ in range(3):  # let their handlers see the end and return
            await asyncio.sleep(0)
        await model_forward.close_all(self.pool)

    def _price_table(self) -> PriceTable:
        if self._prices is None:
            self._prices = load_prices(self.environ)
        return self._prices

    async def _forward(
        self,
        request: ModelRequest,
        origin: ModelOrigin,
        sandbox: str,
        prices: PriceTable,
        writer: asyncio.StreamWriter,
        keep: bool,
    ) -> bool:
        base = origin.upstream or VENDOR_UPSTREAMS[request.api]
        target = model_forward.target_of(base, request.vendor_path, request.query)
        headers, body = upstream_request(
            request,
            self.environ.get(origin.credential_env, "") if origin.credential_env else "",
            bearer=origin.credential_header == "bearer",
        )
        answer = await self._answer(target, headers, body, origin.run_id)
        if isinstance(answer, str):
            error = model_policy.error_body(
                request.api, "api_error", f"overnight gateway: {answer}", 502
            )
            await _send(writer, 502, [], error, keep)
            return keep
        if isinstance(answer, tuple):  # an error answer read whole while deciding on a retry
            status, reason, kept, data = answer
            await _send(writer, status, kept, data, keep, reason)
            return keep
        return await self._relay(request, origin, sandbox, prices, answer, writer, keep)

    async def _answer(
        self, target: model_forward.Target, headers: list[tuple[str, str]], body: bytes, run_id: str
    ) -> model_forward.Answer | tuple[int, str, list[tuple[str, str]], bytes] | str:
        """The upstream's answer, retried while the policy says so: an answer to relay, an
        error answer read whole, or why none came."""
        waited, attempt = 0.0, 0
        while True:
            attempt += 1
            try:
                answer = await model_forward.request(self.pool, target, "POST", headers, body)
            except model_forward.UpstreamFailed as failed:
                why: str = str(failed)
                wait = model_policy.retry_wait(None, {}, b"", attempt, waited)
                if wait is None:
                    return why
            else:
                if answer.status not in model_policy.RETRIED_STATUSES:
                    return answer
                data = await answer.read_all(MAX_ERROR_BODY)
                named = {k.lower(): v for k, v in answer.headers}
                wait = model_policy.retry_wait(answer.status, named, data, attempt, waited)
                why = f"{answer.status} {answer.reason}".strip()
                if wait is None:
                    return answer.status, answer.reason, answer_headers(answer.headers), data
            self.book.retried(run_id, why, time.time())
            logger.info(
                "gateway: model API %s for run %s; trying again in %.1f s", why, run_id, wait
            )
            await asyncio.sleep(wait)
            waited += wait

    async def _relay(
        self,
        request: ModelRequest,
        origin: ModelOrigin,
        sandbox: str,
        prices: PriceTable,
        answer: model_forward.Answer,
        writer: asyncio.StreamWriter,
        keep: bool,
    ) -> bool:
        usage = UsageReader(request.api)
        streamed = "text/event-stream" in answer.header("content-type").lower()
        events = SseEvents(usage_needle(request.api))
        whole = b""
        ended = booked = False
        framed = answer.length is None
        # The answer's end reaches the client only once it is booked, so that the client's
        # next request meets the cap with this answer counted: its last bytes (known from the
        # upstream's framing) are held for that, microseconds. A stream's events go out as
        # they come, those that came together in one write; a whole answer's head goes out
        # with its body.
        held = b""
        head = http_wire.answer_head(
            answer.status, answer.reason, answer_headers(answer.headers), answer.length, keep
        )
        try:
            if framed:
                writer.write(head)
                head = b""
            async for data in answer.chunks():
                piece = http_wire.chunk(data) if framed else data
                if answer.ending:
                    held += piece
                else:
                    writer.write(head + piece if head else piece)
                    head = b""
                    await writer.drain()
                if streamed:
                    for event in events.feed(data):
                        usage.event(event)
                elif len(whole) < MAX_WHOLE_ANSWER:
                    whole += data
            ended = True
            self._book(request, origin, sandbox, prices, answer, usage, whole, ended)
            booked = True
            writer.write(head + held + (http_wire.LAST_CHUNK if framed else b""))
            await writer.drain()
        except (ConnectionError, OSError, asyncio.IncompleteReadError, TimeoutError, ValueError):
            keep = False
        finally:
            answer.close()
            if not booked:
                self._book(request, origin, sandbox, prices, answer, usage, whole, ended)
        return keep and ended

    def _book(
        self,
        request: ModelRequest,
        origin: ModelOrigin,
        sandbox: str,
        prices: PriceTable,
        answer: model_forward.Answer,
        usage: UsageReader,
        whole: bytes,
        complete: bool,
    ) -> None:
        self.answered += 1
        if not request.metered:
            return  # no tokens used (countTokens): nothing to book
        if whole:
            usage.body(whole)
        counted = usage.usage()
        if counted is None and answer.status >= 300:
            return  # an error answer: nothing used
        model = usage.model or model_asked(request)
        price = price_of(prices, model)
        usd = usd_of(price if price is not None else dearest(prices), counted) if counted else 0.0
        line = {
            "at": time.time(),
            "request_id": usage.answer_id
            or answer.header("request-id")
            or answer.header("x-request-id"),
            "route": request.vendor_path,
            "sandbox": sandbox,
            "status": answer.status,
            "model": model,
            "usage": counted.as_dict() if counted else None,
            "usd": usd,
            "unpriced": price is None,
            "complete": complete,
        }
        try:
            self.book.book(origin.run_id, line)
        except OSError:
            logger.exception("gateway: cannot book an answer of run %s ($%.6f)", origin.run_id, usd)
        if counted is None:
            logger.warning("gateway: an answer for run %s said no usage", origin.run_id)


async def _send(
    writer: asyncio.StreamWriter,
    status: int,
    headers: list[tuple[str, str]],
    body: bytes,
    keep: bool,
    reason: str = "",
) -> None:
    """A whole answer: an upstream error read whole, or the gateway's own (JSON)."""
    kept = list(headers)
    if not any(k.lower() == "content-type" for k, _ in kept):
        kept += [("Content-Type", "application/json"), ("X-Overnight-Gateway", "model")]
    writer.write(http_wire.answer_head(status, reason, kept, len(body), keep) + body)
    await writer.drain()
