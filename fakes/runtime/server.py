"""`FakeRuntime`: the fake Runtime API on a loopback port, in a thread with its own loop.

Its own thread and event loop make it behave like a separate server: the client under test
(and a Temporal worker) can block, time out or be cancelled without stalling the fake.

It follows the real API's rules by default (`rules.Rules`: create body ranges and unknown
fields, names given up by stopped sandboxes, leases that pause or stop, wake on request,
`:wake`/`:extend` limits, commands that must fit the lease, the per-key rate limit, at most
four file watches a sandbox, 402s past the daily spending limit or the credit);
`FakeRuntime(..., strict=False)` turns them all off and `rules=Rules(one_rule=False)` one at
a time.

For tests (see `inspection.Inspection`):
- `requests(method, path)`, `served()`: what it received and how it answered (upload parts
  logged without their bytes; `bytes_received(route=)` counts them);
- `request_count(sandbox_id=, route=, status=)`, `counts_by_route(sandbox_id)`,
  `bytes_sent(route=, sandbox_id=)`: counters by route name ("read" is file downloads);
- `wakes`: each wake of a paused sandbox and what caused it; `wakes_by(key)` those a second
  client's key (`add_key`) caused;
- `end_lease_in(sandbox_id, seconds)`, `lease_ends_at(sandbox_id)`, `sandbox_named(name)`;
- `network_rules(sandbox_id)`, `egress_verdict(sandbox_id, host, port)`: a sandbox's network
  rules, and what Runtime's proxy would answer a connection under them;
- money (see `money` for the billing model, `money_routes.MoneyControls`): `prices=`,
  `set_daily_limit`, `forget_daily_spend`, `set_daily_used`, `set_credit`, `exhaust_trial`,
  `charged_micros`, `held_micros`, `daily_used_micros`;
- virtual agents (`virtual.VirtualAgents`): `start_virtual_agent`, `end_virtual_agent`,
  `write_guest_file`, for many runs at once;
- faults: `fail`, `overload`, `drop_connections`, `lose_answers`, `slow`, `hang`,
  `stop_answering`/`resume_answering`, `revoke_key`;
- egress (`guest_network`): `reach(name, port)` serves a name at a loopback port, `trust(pem)`
  adds a CA to what the proxy and the sandboxes trust, `egress_secrets()` the account's
  secrets (values included, for a test to look for).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import pytest

from activities.providers.local.engine import LocalEngine
from activities.providers.local.provider import LocalProvider
from activities.providers.protocol import SandboxProvider
from fakes.runtime.api import RuntimeApi
from fakes.runtime.egress_secrets import EgressSecret
from fakes.runtime.faults import Fault, Faults
from fakes.runtime.guest_network import GuestNetwork
from fakes.runtime.http import serve_connection
from fakes.runtime.inspection import Inspection
from fakes.runtime.money import Billing, Prices
from fakes.runtime.money_routes import MoneyControls
from fakes.runtime.rules import Rules
from fakes.runtime.virtual import VirtualAgents
from overnight.core.asyncio_servers import close_server

T = TypeVar("T")
PROXY_VARIABLES = (
    "HTTP_PROXY",
    "http_proxy",
    "HTTPS_PROXY",
    "https_proxy",
    "ALL_PROXY",
    "all_proxy",
)


class FakeRuntime(Inspection, MoneyControls, VirtualAgents):
    """A loopback Runtime API backed by a sandbox engine built (in the fake's loop) by
    `engine_factory`. Use as a context manager; `url` and `api_key` point a client at it.

    `strict` (default) enforces every rule of the real API; `rules` picks them one by one
    (and sets the limits' numbers). `self.rules` may be changed while the fake runs.
    `prices` are what its sandboxes cost (default: overnight's default `Rates`)."""

    def __init__(
        self,
        engine_factory: Callable[[], SandboxProvider],
        *,
        api_key: str = "test-runtime-key",
        wake: Callable[[SandboxProvider, str], Awaitable[None]] | None = None,
        strict: bool = True,
        rules: Rules | None = None,
        prices: Prices | None = None,
        internet: dict[str, tuple[str, int]] | None = None,
    ) -> None:
        self.api_key = api_key
        self.network = GuestNetwork(internet)
        self.billing = Billing(prices)
        self.rules = rules if rules is not None else Rules() if strict else Rules.lenient()
        self.faults = Faults()
        self._engine_factory = engine_factory
        self._wake = wake
        self._api: RuntimeApi | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._main, name="fake-runtime", daemon=True)
        self._failure: BaseException | None = None
        self.port = 0

    @classmethod
    def local(cls, home: Path, **options: Any) -> FakeRuntime:
        """The fake on the local provider's engine, with sandboxes under `home`."""
        return cls(lambda: LocalProvider(LocalEngine(home)), **options)

    # --- lifecycle ---

    def __enter__(self) -> FakeRuntime:
        self._thread.start()
        self._ready.wait(timeout=30)
        if self._failure is not None:
            raise RuntimeError("the fake Runtime API did not start") from self._failure
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> FakeRuntime:
        return await asyncio.to_thread(self.__enter__)

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await asyncio.to_thread(self.close)

    def close(self) -> None:
        if self._loop is not None and self._stopping is not None and self._thread.is_alive():
            self.faults.clear()
            self._loop.call_soon_threadsafe(self._stopping.set)
        self._thread.join(timeout=30)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def environ(self, config_home: Path) -> dict[str, str]:
        """What a worker needs to use this fake: its URL, a key, no saved login, no proxy."""
        return {
            "RUNTIME_API_URL": self.url,
            "RUNTIME_API_KEY": self.api_key,
            "XDG_CONFIG_HOME": str(config_home),
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
        }

    def use(self, monkeypatch: pytest.MonkeyPatch, config_home: Path) -> None:
        """Point this process's `withruntime` clients at the fake (restored after the test)."""
        for name in PROXY_VARIABLES:
            monkeypatch.delenv(name, raising=False)
        for name, value in self.environ(config_home).items():
            monkeypatch.setenv(name, value)

    def _main(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._serve())
        except BaseException as error:  # noqa: BLE001 - handed to the starting thread
            self._failure = error
            self._ready.set()
        finally:
            loop.close()

    async def _serve(self) -> None:
        self._stopping = asyncio.Event()
        engine = self._engine_factory()
        wake = self._wake

        async def wake_engine(sandbox_id: str) -> None:
            assert wake is not None
            await wake(engine, sandbox_id)

        # Without a wake hook the engine's own `wake` is used (the local one grants a lease).
        hook = None if wake is None else wake_engine
        self._api = RuntimeApi(
            engine, self.faults, {self.api_key}, hook, self.rules, self.billing, self.network
        )
        await self.network.start()
        connections: set[asyncio.Task[None]] = set()

        async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.current_task()
            assert task is not None and self._api is not None
            connections.add(task)
            try:
                await serve_connection(reader, writer, self._api.handle)
            except asyncio.CancelledError:
                pass  # the fake is closing: end quietly (asyncio logs a cancelled handler)
            finally:
                connections.discard(task)

        server = await asyncio.start_server(connection, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        try:
            await self._stopping.wait()
        finally:
            await close_server(server)
            for task in list(connections):
                task.cancel()
            await asyncio.gather(*connections, return_exceptions=True)
            await self._api.watches.close()
            self._api.files.close()
            await self.network.close()
            await server.wait_closed()
            # Leave no agent running: stop every sandbox this fake's engine still has.
            for info in await engine.list({}, include_stopped=False):
                await engine.stop(info.sandbox_id)
            await engine.aclose()

    # --- running things in the fake's loop ---

    def call(self, work: Callable[[SandboxProvider], Coroutine[Any, Any, T]]) -> T:
        """Run `work(engine)` in the fake's loop, e.g. to look at a sandbox behind its back."""
        assert self._loop is not None and self._api is not None
        future = asyncio.run_coroutine_threadsafe(work(self._api.engine), self._loop)
        return future.result(timeout=60)

    async def acall(self, work: Callable[[SandboxProvider], Coroutine[Any, Any, T]]) -> T:
        """`call` for async tests: waits without blocking the caller's loop."""
        assert self._loop is not None and self._api is not None
        future = asyncio.run_coroutine_threadsafe(work(self._api.engine), self._loop)
        return await asyncio.wrap_future(future)

    # --- faults ---

    def fail(
        self,
        times: int | None = 1,
        status: int = 503,
        *,
        route: str = "",
        code: str | None = None,
        retry_after: float | None = None,
        **extra: Any,
    ) -> Fault:
        """Answer the next `times` matching requests with `status` in Runtime's error shape."""
        default = {503: "host_unavailable", 500: "internal_error", 401: "unauthorized"}
        fault = Fault("status", route, times, status, code or default.get(status, "error"))
        fault.retry_after, fault.extra = retry_after, extra
        return self.faults.add(fault)

    def overload(self, times: int | None = 1, *, route: str = "") -> Fault:
        """A 529 "overloaded", as a busy upstream answers (the SDK does not retry it)."""
        return self.fail(times, 529, route=route, code="overloaded")

    def drop_connections(self, times: int | None = 1, *, route: str = "") -> Fault:
        """Read the request, then close the connection without a byte of answer."""
        return self.faults.add(Fault("drop", route, times))

    def lose_answers(self, times: int | None = 1, *, route: str = "") -> Fault:
        """Do the work, then close the connection without answering (a cut after the fact)."""
        return self.faults.add(Fault("lose", route, times))

    def slow(self, seconds: float, times: int | None = None, *, route: str = "") -> Fault:
        """Answer normally, but only after `seconds`."""
        return self.faults.add(Fault("slow", route, times, delay=seconds))

    def hang(self, times: int | None = 1, *, route: str = "") -> Fault:
        """Never answer (until the client gives up or the fake closes)."""
        return self.faults.add(Fault("hang", route, times))

    def stop_answering(self, sandbox_id: str) -> None:
        """Every route of this sandbox hangs until `resume_answering`."""
        self.faults.silence(sandbox_id)

    def resume_answering(self, sandbox_id: str) -> None:
        self.faults.silence(sandbox_id, silent=False)

    # --- egress ---

    def reach(self, name: str, port: int) -> None:
        """The fake's sandboxes (through its proxy) find `name` at this loopback port."""
        self.network.reach(name, port)

    def trust(self, ca_pem: bytes) -> None:
        """Its proxy and its sandboxes trust this CA, as they trust the public roots."""
        self.network.trust(ca_pem)

    def egress_secrets(self) -> list[EgressSecret]:
        return self.network.secrets.all()

    def add_key(self, api_key: str) -> dict[str, str]:
        """Accept `api_key` too (a second client, e.g. a person's CLI beside the worker, whose
        requests `wakes_by` tells apart); returns the environment change that uses it."""
        assert self._api is not None
        self._api.api_keys.add(api_key)
        return {"RUNTIME_API_KEY": api_key}

    def revoke_key(self) -> None:
        """From now on every request is answered 401."""
        assert self._api is not None
        self._api.api_keys.clear()
