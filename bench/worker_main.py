"""One benchmark worker process: `python -m bench.worker_main --system overnight|baseline ...`.

overnight's worker is `overnight.worker.runner.serve` itself; the baseline's is
`bench.baseline_worker.serve_baseline`. With `--provider fake` the sandboxes are
`fakes.provider.FakeProvider`'s virtual agents (in this process); with `local`, real local
sandboxes under `$OVERNIGHT_HOME` (with `--counts-file`, the engine's looks and reads counted
there, see bench/counting.py); with `runtime`, the runtime provider too (the Runtime API named
by `RUNTIME_API_URL` and `RUNTIME_API_KEY`). Prints `ready` (and creates `--ready-file`) once
polling; SIGTERM stops it gracefully.
With `--metrics-port` the SDK's own metrics (e.g. heartbeat requests sent) are served there.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from pathlib import Path

from temporalio.client import Client
from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig

from activities.providers.local.provider import LocalProvider
from activities.providers.protocol import SandboxProvider
from activities.providers.registry import PROVIDERS
from bench.baseline_worker import serve_baseline
from bench.counting import CountingEngine, dump_counts
from fakes.provider import FakeProvider, VirtualCheckpoints
from overnight.core.codec import data_converter
from overnight.worker.runner import serve

# Room beyond the runs themselves: creates, reads and cleanups run beside the long polls.
SLOT_MARGIN = 200


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.worker_main")
    parser.add_argument("--system", choices=("overnight", "baseline"), required=True)
    parser.add_argument("--provider", choices=("local", "fake", "runtime"), default="local")
    parser.add_argument("--address", required=True)
    parser.add_argument("--namespace", default="default")
    parser.add_argument("--task-queue", required=True)
    parser.add_argument("--max-runs", type=int, default=1000)
    parser.add_argument("--fake-log", type=Path, help="where the fake provider logs agent starts")
    parser.add_argument("--fake-interval", type=float, nargs=2, default=(30.0, 60.0))
    parser.add_argument("--metrics-port", type=int)
    parser.add_argument("--counts-file", type=Path, help="local: count looks and reads here")
    parser.add_argument("--ready-file", type=Path, help="created once the worker polls")
    return parser.parse_args(argv)


async def run(args: argparse.Namespace) -> None:
    runtime = Runtime.default()
    if args.metrics_port:
        metrics = PrometheusConfig(bind_address=f"127.0.0.1:{args.metrics_port}")
        runtime = Runtime(telemetry=TelemetryConfig(metrics=metrics))
    client = await Client.connect(
        args.address,
        namespace=args.namespace,
        # Encrypted when OVERNIGHT_CODEC_KEYS is set, as overnight's own worker (bench/codec.py).
        data_converter=data_converter(),
        runtime=runtime,
    )
    providers: dict[str, SandboxProvider] | None = None
    counting: asyncio.Task[None] | None = None
    if args.provider == "fake":
        low, high = args.fake_interval
        agents = VirtualCheckpoints((low, high), log_path=args.fake_log)
        providers = {"local": FakeProvider(agents)}
    elif args.provider == "runtime":
        providers = {"local": LocalProvider(), "runtime": PROVIDERS["runtime"].build()}
    elif args.counts_file is not None:
        engine = CountingEngine()
        providers = {"local": LocalProvider(engine)}
        counting = asyncio.create_task(dump_counts(engine, args.counts_file))
    ready, stop = asyncio.Event(), asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    announce = asyncio.create_task(_announce(ready, args.ready_file))
    slots = args.max_runs + SLOT_MARGIN
    try:
        if args.system == "overnight":
            await serve(
                client,
                task_queue=args.task_queue,
                ready=ready,
                stop=stop,
                providers=providers,
                max_concurrent_activities=slots,
                max_cached_workflows=slots,
            )
        else:
            await serve_baseline(
                client,
                task_queue=args.task_queue,
                ready=ready,
                stop=stop,
                providers=providers,
                max_concurrent_activities=slots,
                max_cached_workflows=slots,
            )
    finally:
        announce.cancel()
        if counting is not None:
            counting.cancel()


async def _announce(ready: asyncio.Event, ready_file: Path | None) -> None:
    await ready.wait()
    if ready_file is not None:
        ready_file.touch()
    print("ready", flush=True)


def main(argv: list[str] | None = None) -> None:
    asyncio.run(run(parse_args(sys.argv[1:] if argv is None else argv)))


if __name__ == "__main__":
    main()
