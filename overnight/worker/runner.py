"""Run the overnight worker: AgentRun plus the sandbox activities, until told to stop.

`serve` runs the worker on a client; `run_dev` (`python worker.py --dev`, `overnight dev`)
first starts or reuses the local dev server; `run_with_env_config` (`python worker.py`)
connects with Temporal's environment configuration.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from temporalio.client import Client
from temporalio.worker import Worker

from overnight.core.codec import data_converter
from overnight.core.codec import describe as describe_codec
from overnight.core.connect import connect
from overnight.core.constants import TASK_QUEUE
from overnight.core.home import overnight_home
from overnight.core.host_settings import this_host
from overnight.core.hosts import host_queue
from overnight.core.local_services import Declared
from overnight.worker import log_lines
from overnight.worker.dev_ports import moved_lines, with_port
from overnight.worker.devconfig import find_dev_settings
from overnight.worker.devserver import start_or_reuse
from overnight.worker.fleet import report_runs_by_state, start_counters_at_zero
from overnight.worker.registration import registered_workflows, worker_interceptors
from overnight.worker.telemetry import Telemetry
from overnight.worker.workflow_runner import shared_module_runner

if TYPE_CHECKING:
    from activities.providers.protocol import SandboxProvider
    from overnight.core.admission import AdmissionSettings
    from overnight.core.grants import Grants

# Every supervised run holds one long-poll observe activity at all times, and those are cheap
# coroutines: the SDK's default of 100 slots would cap a worker at 100 runs.
MAX_CONCURRENT_ACTIVITIES = 5000
MAX_CACHED_WORKFLOWS = 5000
# The SDK sends at most one heartbeat per min(0.8 x heartbeat timeout, this): at least the
# longest interval our activities heartbeat at (0.8 x the observe's 270 s timeout,
# activities.heartbeat), so each heartbeat they make is sent when made, and none more.
HEARTBEAT_THROTTLE = timedelta(seconds=216)
# On SIGTERM (a deploy) the observes hand their watches to other workers at once; other
# activities (a create, a snapshot) get this long to finish before they are handed over too.
GRACEFUL_SHUTDOWN = timedelta(seconds=10)
# How long whatever stops the worker (systemd's TimeoutStopSec, Kubernetes'
# terminationGracePeriodSeconds) should wait after SIGTERM before SIGKILL: the graceful
# shutdown, then the SDK cancelling what is left and the providers closing. deploy/ uses it.
STOP_TIMEOUT = GRACEFUL_SHUTDOWN + timedelta(seconds=5)
logger = logging.getLogger(__name__)


async def serve(
    client: Client,
    *,
    task_queue: str = TASK_QUEUE,
    ready: asyncio.Event | None = None,
    stop: asyncio.Event | None = None,
    max_concurrent_activities: int = MAX_CONCURRENT_ACTIVITIES,
    max_cached_workflows: int = MAX_CACHED_WORKFLOWS,
    providers: Mapping[str, SandboxProvider] | None = None,
    grants: Grants | None = None,
    reap_schedule: bool = False,
    admission: AdmissionSettings | None = None,
    host: str | None = None,
) -> None:
    """Poll `task_queue` for AgentRun workflows and sandbox activities until `stop` is set
    (or this task is cancelled); then shut the worker down and close the providers. Poll
    too this host's own queue (`<task_queue>@<host>`, overnight.core.hosts; `host`: default
    `OVERNIGHT_HOST` or the machine's name), where the steps on its local sandboxes go; before
    it does, the agents of runs that moved to another host meanwhile are stopped.

    `providers` replaces the ones built from the environment (the benchmarks pass an
    in-process fake whose agents cost nothing); `grants`, what specs may ask for, replace the
    ones in the environment (overnight/core/grants.py; a worker in a test grants what it runs);
    `reap_schedule`: make the hourly reap's Temporal Schedule unless it exists
    (overnight.worker.reap_schedule; the `worker.py` and `overnight dev` workers do);
    `admission`, how many runs the pool lets go at once, too (overnight/core/admission.py)."""
    # Imported here so that modules needing only the client (the CLI) do not load providers.
    from activities.gateway.service import Gateway
    from activities.worker_activities import WorkerActivities
    from overnight.worker.moved_away import stop_moved_away
    from overnight.worker.reap_schedule import ReapActivities, ensure_reap_schedule

    log_lines.install()  # a failed attempt's deliberate error in one line, not a traceback
    own_queue = host_queue(task_queue, host or this_host())
    if providers is None:
        _warn_if_local_runs_cannot_be_isolated()
        _tell_local_disks()
        _tell_coding_agents()
        worker_activities = WorkerActivities.from_env(
            client, grants=grants, admission=admission, host_queue=own_queue
        )
    else:
        worker_activities = WorkerActivities(
            client, providers=providers, grants=grants, admission=admission, host_queue=own_queue
        )
    logger.info("what specs may ask for here: %s", worker_activities.grants.describe())
    # This host's sandboxes' only way out (activities/gateway): up before any sandbox is made.
    gateway = Gateway(overnight_home())
    gateway.start()
    logger.info("admission: %s", worker_activities.admission.describe())
    # Declared, so other workers on this machine keep its ports (metrics) from their specs.
    async with worker_activities, Declared("worker"):
        activities = [*worker_activities.all(), ReapActivities(client).reap_sandboxes]
        worker = Worker(
            client,
            task_queue=task_queue,
            # The same list `overnight replay-check` replays histories against.
            workflows=registered_workflows(),
            activities=activities,
            interceptors=worker_interceptors(),
            max_concurrent_activities=max_concurrent_activities,
            max_cached_workflows=max_cached_workflows,
            max_heartbeat_throttle_interval=HEARTBEAT_THROTTLE,
            graceful_shutdown_timeout=GRACEFUL_SHUTDOWN,
            # One copy of overnight's modules for every cached run
            # (overnight/worker/workflow_runner.py).
            workflow_runner=shared_module_runner(),
        )
        # The same activities, for this host's sandboxes only (no workflows: any worker runs
        # those). Its own slots: a full shared worker never starves this host's watches.
        host_worker = Worker(
            client,
            task_queue=own_queue,
            activities=activities,
            interceptors=worker_interceptors(),
            max_concurrent_activities=max_concurrent_activities,
            max_heartbeat_throttle_interval=HEARTBEAT_THROTTLE,
            graceful_shutdown_timeout=GRACEFUL_SHUTDOWN,
        )
        if reap_schedule:
            await ensure_reap_schedule(client, task_queue)
        logger.info("this host's sandboxes are served on task queue %r", own_queue)

        async def before_host_queue() -> None:
            # Queries of the runs need a workflow worker: the shared one is polling by now.
            try:
                provider = await worker_activities.host_provider()
                await stop_moved_away(client, provider, own_queue)
            except Exception:  # serve this host's runs even if the look failed
                logger.exception("could not look for agents of runs that moved away")

        try:
            await run_worker(
                worker, ready=ready, stop=stop, then=host_worker, before_then=before_host_queue
            )
        finally:
            await asyncio.to_thread(gateway.stop)


def _warn_if_local_runs_cannot_be_isolated() -> None:
    from activities.providers.local.isolation import INSTALL_HINT, bwrap_problem

    problem = bwrap_problem()
    if problem is not None:
        logger.warning("local runs will be refused: %s: %s", problem, INSTALL_HINT)


def _tell_local_disks() -> None:
    from activities.providers.local.disk_limit import worker_summary

    logger.info("local sandboxes' disks: %s", worker_summary(overnight_home()))


def _tell_coding_agents() -> None:
    from overnight.worker.agent_clis import check_all

    # Looked at, not run (`overnight agents` runs them): one line a kind, with its fix.
    lines = "; ".join(state.line() for state in check_all(verify=False))
    logger.info("coding agents (spec agent): %s", lines)


async def run_worker(
    worker: Worker,
    *,
    ready: asyncio.Event | None = None,
    stop: asyncio.Event | None = None,
    then: Worker | None = None,
    before_then: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """Run `worker` until `stop` is set, the task is cancelled or the worker fails.

    `then`: a second worker (the host queue's), started once `worker` runs and `before_then`
    is done; both stop together. `ready` is set once they are running. On the way out they
    are shut down gracefully: the observes hand their watches to other workers at once, other
    activities get `GRACEFUL_SHUTDOWN` to finish and are then handed over too
    (activities.heartbeat). A worker failure is raised here.
    """
    stop = stop or asyncio.Event()
    running = {asyncio.create_task(worker.run(), name=f"worker {worker.task_queue}"): worker}
    try:
        await _until_running(worker, running)
        if then is not None and not any(task.done() for task in running):
            if before_then is not None:
                await before_then()
            running[asyncio.create_task(then.run(), name=f"worker {then.task_queue}")] = then
            await _until_running(then, running)
        if ready is not None and all(w.is_running for w in running.values()):
            ready.set()
        stop_requested = asyncio.create_task(stop.wait())
        try:
            await asyncio.wait({*running, stop_requested}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop_requested.cancel()
        for task in running:
            if task.done():
                task.result()  # a worker failed on its own: let the caller see why
    finally:
        left = [_shutdown(w, task) for task, w in running.items() if not task.done()]
        if left:
            await asyncio.shield(asyncio.gather(*left))


async def _until_running(worker: Worker, running: Mapping[asyncio.Task[None], Worker]) -> None:
    while not worker.is_running and not any(task.done() for task in running):
        await asyncio.sleep(0.01)


async def run_dev(
    config_path: Path | str | None = None,
    *,
    port: int | None = None,
    task_queue: str = TASK_QUEUE,
    ready: asyncio.Event | None = None,
    stop: asyncio.Event | None = None,
) -> None:
    """Start or reuse the dev server, print the Web UI address, run the worker until stopped.

    Without `config_path`, temporal-dev.yaml from the current folder or the repo is used (it
    says which). `port`: the server's gRPC port (its Web UI's + 1000), which must be free;
    without it, the file's port, or the next free ones when another program holds it.
    Without a `stop` event, SIGINT and SIGTERM stop it (a second one stops waiting). The
    server is stopped on the way out only if this call started it.
    """
    settings = find_dev_settings(config_path)
    print(settings.describe(), flush=True)
    config = with_port(settings.config, port)
    converter = data_converter()  # a bad OVERNIGHT_CODEC_KEYS is refused before any start
    telemetry = Telemetry.from_env(os.environ)
    async with _stop_on_signals(stop) as stop_event:
        server = await start_or_reuse(config, move_when_held=port is None)
        try:
            how = "started here" if server.started_here else "already running, reused"
            print(f"Temporal dev server at {server.address} ({how})", flush=True)
            for line in moved_lines(server.moved_from, server.config):
                print(line, flush=True)
            if config.ui:
                print(f"Temporal Web UI: {server.ui_url}", flush=True)
            # Plain loopback connection: env config (TLS, API keys) is for real clusters.
            client = await Client.connect(
                server.address,
                namespace=server.namespace,
                data_converter=converter,
                runtime=telemetry.runtime(),
                interceptors=telemetry.interceptors(),
            )
            await _serve_announced(client, task_queue, ready, stop_event, telemetry)
        finally:
            if server.started_here:
                print("stopping the dev server", flush=True)
            server.stop()


async def run_with_env_config(
    *,
    task_queue: str = TASK_QUEUE,
    ready: asyncio.Event | None = None,
    stop: asyncio.Event | None = None,
) -> None:
    """Run the worker against the cluster Temporal's environment configuration names."""
    telemetry = Telemetry.from_env(os.environ)
    async with _stop_on_signals(stop) as stop_event:
        client = await connect(runtime=telemetry.runtime(), interceptors=telemetry.interceptors())
        print(f"connected to {client.service_client.config.target_host}", flush=True)
        await _serve_announced(client, task_queue, ready, stop_event, telemetry)


async def _serve_announced(
    client: Client,
    task_queue: str,
    ready: asyncio.Event | None,
    stop: asyncio.Event,
    telemetry: Telemetry,
) -> None:
    worker_ready = ready or asyncio.Event()
    announce = asyncio.create_task(_announce_when(worker_ready, task_queue, client))
    print(f"telemetry: {telemetry.describe()}", flush=True)
    fleet = None
    if telemetry.metrics_address is not None:
        start_counters_at_zero(client, task_queue)
        every = telemetry.runs_every_seconds
        fleet = asyncio.create_task(
            report_runs_by_state(client, every_seconds=every), name="runs by state"
        )
    try:
        await serve(
            client, task_queue=task_queue, ready=worker_ready, stop=stop, reap_schedule=True
        )
    finally:
        announce.cancel()
        if fleet is not None:
            fleet.cancel()
        telemetry.shutdown()
    print("worker stopped", flush=True)


async def _announce_when(ready: asyncio.Event, task_queue: str, client: Client) -> None:
    await ready.wait()
    print(describe_codec(client.data_converter), flush=True)
    print(
        f"worker polling task queue {task_queue!r} in namespace {client.namespace!r}; Ctrl-C stops",
        flush=True,
    )


async def _shutdown(worker: Worker, running: asyncio.Task[None]) -> None:
    if worker.is_running and not worker.is_shutdown:
        await worker.shutdown()
    with contextlib.suppress(asyncio.CancelledError):
        await running


@contextlib.asynccontextmanager
async def _stop_on_signals(stop: asyncio.Event | None) -> AsyncIterator[asyncio.Event]:
    """Yield `stop`, or a fresh event set by SIGINT/SIGTERM (a second signal cancels the run)."""
    if stop is not None:
        yield stop
        return
    event = asyncio.Event()
    if threading.current_thread() is not threading.main_thread():
        yield event  # signal handlers can only be installed from the main thread
        return
    loop = asyncio.get_running_loop()
    main_task = asyncio.current_task()

    def on_signal() -> None:
        if event.is_set() and main_task is not None:
            main_task.cancel()  # asked twice: stop waiting for a graceful shutdown
        event.set()

    signals = (signal.SIGINT, signal.SIGTERM)
    for sig in signals:
        loop.add_signal_handler(sig, on_signal)
    try:
        yield event
    finally:
        for sig in signals:
            loop.remove_signal_handler(sig)
