"""The console's ASGI app: every page module's routes, the static files, and the headers
every response carries (the strict Content-Security-Policy among them).

`build_app(context)` is all a server needs (`overnight console` runs it under uvicorn; the
tests too). The context's runs source, when it has one, runs for the app's lifetime.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.responses import PlainTextResponse
from starlette.routing import BaseRoute, Mount
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from overnight.console import login_page, night_page, run_page, runs_page
from overnight.console.context import ConsoleContext
from overnight.console.limits import BodyLimit, StreamLimit
from overnight.console.render import SECURITY_HEADERS

# Host names a console bound to loopback answers to: a page of another site that rebinds its
# name to 127.0.0.1 (DNS rebinding) is refused before any route.
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "[::1]"})


class SecurityHeaders:
    """Adds `SECURITY_HEADERS` to every response that lacks them: pages, static files, errors."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {name.lower() for name, _ in headers}
                for name, value in SECURITY_HEADERS.items():
                    if name.encode() not in present:
                        headers.append((name.encode(), value.encode()))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, with_headers)


class LoopbackHosts:
    """Refuses (400) a request whose `Host` is not a loopback name."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            headers = dict(scope.get("headers", []))
            if host_name(headers.get(b"host", b"").decode("latin-1")) not in LOOPBACK_HOSTS:
                response = PlainTextResponse("this console answers for loopback names only", 400)
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def host_name(host: str) -> str:
    """`Host`'s name without its port: `[::1]:8234` -> `[::1]`, `localhost:80` -> `localhost`."""
    if host.startswith("["):
        return host[: host.find("]") + 1] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def routes() -> list[BaseRoute]:
    return [
        *login_page.routes,
        *runs_page.routes,
        *run_page.routes,
        *night_page.routes,
        Mount("/static", StaticFiles(packages=[("overnight.console", "static")]), name="static"),
    ]


def build_app(context: ConsoleContext) -> Starlette:
    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with contextlib.AsyncExitStack() as stack:
            if context.runs is not None:
                await stack.enter_async_context(context.runs)
            yield

    middleware = [Middleware(SecurityHeaders)]
    if context.settings.loopback:
        middleware.append(Middleware(LoopbackHosts))
    # What one request may cost, whoever sends it (overnight/console/limits.py).
    middleware += [Middleware(BodyLimit), Middleware(StreamLimit)]
    app = Starlette(routes=routes(), middleware=middleware, lifespan=lifespan)
    app.state.console = context
    return app
