"""Start the local Temporal dev server from temporal-dev.yaml, or reuse one that already answers.

A server this process started runs in its own process group (so a terminal's Ctrl-C reaches
only us, and we decide when it stops) with its output in a log file under the state directory.
`DevServer.stop()` stops only a server this process started; a reused one is left alone.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import (
    AddSearchAttributesRequest,
    ListSearchAttributesRequest,
    ListSearchAttributesResponse,
)
from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.service import RPCError, RPCStatusCode

from overnight.core.errors import OvernightError
from overnight.worker.binaries import temporal_cli_path
from overnight.worker.dev_ports import free_pair, held_ports
from overnight.worker.devconfig import DevConfig

log = logging.getLogger(__name__)

_PROBE_TIMEOUT = 3.0
_RETRY_INTERVAL = 0.2
_STOP_GRACE_SECONDS = 15.0
_LOG_TAIL_BYTES = 4000
# A loaded dev server now and then answers an operator read "operation was canceled"
# (CANCELLED, seen in CI): asked again, it answers. The SDK retries none of these itself.
_TRANSIENT = {
    RPCStatusCode.CANCELLED,
    RPCStatusCode.UNAVAILABLE,
    RPCStatusCode.DEADLINE_EXCEEDED,
    RPCStatusCode.RESOURCE_EXHAUSTED,
}
_LIST_TRIES = 5
# How long a held port is given to turn into a Temporal server (another invocation starting).
HELD_GRACE_SECONDS = 2.5

_Probe = Callable[[], Awaitable[bool]]


class DevServerError(OvernightError, RuntimeError):
    """The dev server could not be started, or something else holds its port."""


@dataclass
class DevServer:
    """A dev server this process started (`process` set) or found already running (reused)."""

    config: DevConfig
    process: subprocess.Popen[bytes] | None = None
    # The address asked for, when something else held it and the server moved to `address`.
    moved_from: str | None = None

    @property
    def address(self) -> str:
        return self.config.address

    @property
    def ui_url(self) -> str:
        return self.config.ui_url

    @property
    def namespace(self) -> str:
        return self.config.namespace

    @property
    def log_file(self) -> Path:
        return self.config.log_file

    @property
    def started_here(self) -> bool:
        return self.process is not None

    def stop(self, grace_seconds: float = _STOP_GRACE_SECONDS) -> None:
        """Stop the server if this process started it: SIGTERM, then SIGKILL after the grace."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        _signal_group(process, signal.SIGTERM)
        try:
            process.wait(timeout=grace_seconds)
        except subprocess.TimeoutExpired:
            log.warning("dev server did not stop in %.0fs; killing it", grace_seconds)
            _signal_group(process, signal.SIGKILL)
            process.wait()
        else:
            # The CLI may leave children (the UI server) in its group; make sure none outlive it.
            _signal_group(process, signal.SIGKILL)


async def start_or_reuse(
    config: DevConfig,
    *,
    binary: Path | None = None,
    stop_with_parent: bool = False,
    move_when_held: bool = False,
) -> DevServer:
    """Return a ready dev server at `config.address`: the one already answering, or a new one.

    Ready means a client connects and the namespace can be described (and, for a server
    started here with the UI on, the Web UI answers). With `stop_with_parent` (Linux; tests use
    it) a server started here is killed if this process dies without stopping it. A port held
    by something that is not a Temporal server fails within seconds (`DevServerError`), or,
    with `move_when_held`, the server starts on the next free ports (`DevServer.moved_from`).
    """
    moved_from = None
    held = held_ports(config)
    # A server answering, or perhaps another invocation starting one right now: a short grace,
    # not the startup time (a port held by anything else would keep a person waiting).
    grace = min(HELD_GRACE_SECONDS, config.startup_timeout_seconds)
    if config.port in held and await _wait_until(_answers(config), grace):
        log.info("reusing the Temporal server already answering at %s", config.address)
        client = await _connect(config.address, config.namespace)
        await ensure_search_attributes(client, config.namespace, config.search_attributes)
        return DevServer(config)
    if held:
        if not move_when_held:
            raise DevServerError(_held_message(config, held))
        moved_from, config = config.address, free_pair(config)
        log.info("%s is held by another program; starting on %s", moved_from, config.address)

    server = DevServer(
        config, _spawn(config, binary or temporal_cli_path(), stop_with_parent), moved_from
    )
    try:
        await _wait_for_start(server)
    except BaseException:
        server.stop()
        raise
    if server.process is None:
        log.info("another process started the server at %s first; reusing it", config.address)
    else:
        log.info("started the Temporal dev server at %s (log: %s)", config.address, config.log_file)
    return server


def _held_message(config: DevConfig, held: list[int]) -> str:
    what = (
        f"{config.address} is in use but no Temporal server answers there"
        if config.port in held
        else f"the Web UI's port {config.ui_port} is in use by another program"
    )
    return (
        f"{what}: stop whatever holds it, or pick another port "
        "(`overnight dev --port N`, or `port` in temporal-dev.yaml)"
    )


async def server_answers(address: str, namespace: str) -> bool:
    """True when a Temporal frontend at `address` accepts a client and knows `namespace`."""
    if not await _port_open(address):
        return False
    try:
        client = await _connect(address, namespace)
        await client.workflow_service.describe_namespace(
            DescribeNamespaceRequest(namespace=namespace),
            timeout=timedelta(seconds=_PROBE_TIMEOUT),
        )
    except (RuntimeError, RPCError, TimeoutError, OSError):
        return False
    return True


async def list_search_attributes(client: Client, namespace: str) -> ListSearchAttributesResponse:
    """The namespace's search attributes, asked again (a few times) after a transient answer."""
    request = ListSearchAttributesRequest(namespace=namespace)
    for attempt in range(1, _LIST_TRIES):
        try:
            return await client.operator_service.list_search_attributes(request)
        except RPCError as error:
            if error.status not in _TRANSIENT:
                raise
            await asyncio.sleep(_RETRY_INTERVAL * attempt)
    return await client.operator_service.list_search_attributes(request)


async def ensure_search_attributes(
    client: Client, namespace: str, wanted: Mapping[str, str]
) -> None:
    """Register any of `wanted` the server lacks. A failure is logged, never raised:
    overnight runs without its search attributes, the Web UI just shows less."""
    try:
        listed = await list_search_attributes(client, namespace)
        known = set(listed.custom_attributes) | set(listed.system_attributes)
        missing = {
            name: indexed_value_type(kind) for name, kind in wanted.items() if name not in known
        }
        if missing:
            await client.operator_service.add_search_attributes(
                AddSearchAttributesRequest(namespace=namespace, search_attributes=missing)
            )
            log.info("registered search attributes %s", ", ".join(sorted(missing)))
    except RPCError as exc:
        log.warning("could not register search attributes %s: %s", sorted(wanted), exc)


def ui_answers(url: str, timeout: float = _PROBE_TIMEOUT) -> bool:
    """True when an HTTP GET of `url` answers 200 (proxies bypassed: this is loopback)."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=timeout) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def _spawn(config: DevConfig, binary: Path, stop_with_parent: bool) -> subprocess.Popen[bytes]:
    config.db_file.parent.mkdir(parents=True, exist_ok=True)
    config.log_file.parent.mkdir(parents=True, exist_ok=True)
    with config.log_file.open("ab") as log_out:
        log_out.write(f"\n--- {time.strftime('%Y-%m-%dT%H:%M:%S')} starting ---\n".encode())
        log_out.flush()
        return subprocess.Popen(
            config.start_dev_args(binary),
            stdin=subprocess.DEVNULL,
            stdout=log_out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent if stop_with_parent and sys.platform == "linux" else None,
        )


def _die_with_parent() -> None:
    # Runs in the child between fork and exec: ask the kernel for SIGKILL when the parent dies.
    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)


async def _wait_for_start(server: DevServer) -> None:
    config, process = server.config, server.process
    assert process is not None
    deadline = time.monotonic() + config.startup_timeout_seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            server.process = None
            # Lost a race for the port to another invocation: theirs is as good as ours. (A
            # port nobody holds: it failed on its own, and waiting would change nothing.)
            if config.port in held_ports(config) and await _wait_until(
                _answers(config), config.startup_timeout_seconds
            ):
                return
            raise DevServerError(
                f"the dev server exited with code {process.returncode}; "
                f"end of {config.log_file}:\n{_log_tail(config.log_file)}"
            )
        if await server_answers(config.address, config.namespace) and (
            not config.ui or await asyncio.to_thread(ui_answers, config.ui_url)
        ):
            return
        await asyncio.sleep(_RETRY_INTERVAL)
    raise DevServerError(
        f"the dev server did not answer at {config.address} within "
        f"{config.startup_timeout_seconds:.0f}s; see {config.log_file}"
    )


def _answers(config: DevConfig) -> _Probe:
    return lambda: server_answers(config.address, config.namespace)


async def _wait_until(probe: _Probe, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        try:
            if await asyncio.wait_for(probe(), timeout=left):
                return True
        except TimeoutError:
            return False
        await asyncio.sleep(_RETRY_INTERVAL)
    return False


async def _connect(address: str, namespace: str) -> Client:
    return await asyncio.wait_for(
        Client.connect(address, namespace=namespace, data_converter=pydantic_data_converter),
        timeout=_PROBE_TIMEOUT,
    )


async def _port_open(address: str) -> bool:
    host, _, port = address.rpartition(":")
    try:
        _, writer = await asyncio.wait_for(
            asyncio.open_connection(host.strip("[]"), int(port)), timeout=_PROBE_TIMEOUT
        )
    except (OSError, TimeoutError):
        return False
    writer.close()
    try:
        await writer.wait_closed()
    except OSError:
        pass
    return True


def _signal_group(process: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    try:
        os.killpg(process.pid, sig)
    except ProcessLookupError:
        pass


def indexed_value_type(kind: str) -> IndexedValueType.ValueType:
    """A search attribute's type as temporal-dev.yaml names it, as the operator API takes it."""
    # "KeywordList" -> INDEXED_VALUE_TYPE_KEYWORD_LIST
    snake = "".join(f"_{c}" if c.isupper() and i else c for i, c in enumerate(kind)).upper()
    return IndexedValueType.Value(f"INDEXED_VALUE_TYPE_{snake}")


def _log_tail(path: Path) -> str:
    try:
        with path.open("rb") as f:
            f.seek(max(0, path.stat().st_size - _LOG_TAIL_BYTES))
            return f.read().decode(errors="replace")
    except OSError:
        return "(no log)"
