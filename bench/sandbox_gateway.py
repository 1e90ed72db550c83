"""What the gateway costs a local sandbox: `python -m bench.sandbox_gateway [--quick]`.

A sandbox behind the gateway has no route out: the gateway's port (and its `host_ports`) are
relayed onto its loopback, and its tools go through the gateway's HTTP(S) proxy. Measured on
the local engine and a real gateway running in this process, as it runs in the worker's
(bench/gateway_world.py), each against a baseline in the same run (bench/gateway_measure.py):

1. start-up: a new sandbox's create and first command (`true`), and an agent's start, behind
   the gateway vs today's slirp4netns network (a NAT with no way to the host's loopback);
2. a 100 MB download from a loopback server through the gateway vs the same sandbox's relay
   straight to the server (`host_ports`), and, for context, curl on the host and curl in a
   slirp4netns sandbox to this machine's own address;
3. requests a second when 50 sandboxes each make short requests, a new connection each, for a
   fixed window: through the gateway vs through their relay only; and the gateway's CPU.

Rows (group `gateway`) go into bench/results/latest.json beside the suite's.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.gateway_download import measure_download
from bench.gateway_measure import (
    Phase,
    measure_load,
    measure_startup,
    phase_json,
    summary,
)
from bench.gateway_world import world
from bench.report import RESULTS_DIR, Row, machine, render_text, save_results

GROUP = "gateway"
# What the gateway may add to a sandbox's start-up, in seconds (issue 48).
ADDED_START_TARGET = 0.05
# The least share of the direct path's throughput a download through the gateway keeps.
THROUGHPUT_RATIO_TARGET = 0.8


@dataclass(frozen=True)
class Plan:
    samples: int = 30
    download_mb: int = 100
    repeats: int = 5
    sandboxes: int = 50
    seconds: float = 15.0


QUICK = Plan(samples=2, download_mb=4, repeats=1, sandboxes=3, seconds=1.0)


def own_address() -> str | None:
    """This machine's address on its default route (a UDP connect sends nothing), or None."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(("198.51.100.1", 9))
            address = str(probe.getsockname()[0])
    except OSError:
        return None
    return None if address.startswith("127.") else address


def measure(plan: Plan, slirp_download: bool = True) -> dict[str, Any]:
    address = own_address() if slirp_download else None
    with world(plan.download_mb * 10**6, [address] if address else []) as here:
        startup = measure_startup(here.engine, plan.samples)
        download = measure_download(here, plan.repeats, address)
        load = measure_load(here, plan.sandboxes, plan.seconds)
    return {"startup": startup, "download": download, "load": load, "own_address": address}


def _startup_rows(startup: dict[str, dict[str, list[float]]], samples: int) -> list[Row]:
    rows = []
    for step, what in (
        ("first_command", "a new sandbox's create + first command (`true`)"),
        ("agent", "an agent's start in it"),
    ):
        base, value = summary(startup["slirp4netns"][step]), summary(startup["gateway"][step])
        for stat in ("median", "p90"):
            rows.append(
                Row(
                    f"sandbox start-up, {what}, {stat}: behind the gateway vs slirp4netns",
                    "s",
                    base[stat],
                    value[stat],
                    target=f"adds <= {ADDED_START_TARGET} s",
                    at_most=round(base[stat] + ADDED_START_TARGET, 4),
                    note=f"{stat} of {samples}, interleaved; baseline: today's network "
                    "(slirp4netns, no relay)",
                )
            )
    return rows


def _download_rows(download: dict[str, Any], mb: int, repeats: int) -> list[Row]:
    speed = download["mb_per_second"]
    cpu = download["cpu_seconds"]
    rows = [
        Row(
            f"{mb} MB download through the gateway vs the same sandbox's relay alone",
            "MB/s",
            speed["relay"],
            speed["gateway"],
            target=f"ratio >= {THROUGHPUT_RATIO_TARGET}",
            at_least=round(THROUGHPUT_RATIO_TARGET * speed["relay"], 1),
            note=f"median of {repeats}, curl in one sandbox: its host_ports relay straight to "
            "the loopback server, or the relay to the gateway's proxy to it (only the proxy "
            f"differs); CPU s per download: the gateway {cpu['gateway']['gateway']}, the "
            f"relay {cpu['gateway']['relays']} (relay alone: {cpu['relay']['relays']})",
        ),
        Row(
            f"{mb} MB download through the gateway vs curl on the host",
            "MB/s",
            speed["host"],
            speed["gateway"],
            note="context: no sandbox, no relay, no proxy",
        ),
    ]
    if "slirp4netns" in speed:
        rows.append(
            Row(
                f"{mb} MB download through the gateway vs today's slirp4netns sandbox",
                "MB/s",
                speed["slirp4netns"],
                speed["gateway"],
                note="context: curl in a slirp4netns sandbox to the server on this machine's "
                "own address (the way an agent downloaded before the gateway)",
            )
        )
    return rows


def _load_rows(load: dict[str, Phase]) -> list[Row]:
    direct, proxy = load["direct"], load["proxy"]
    cpu = proxy.cpu_seconds
    cores = {who: round(cpu[who] / cpu["window"], 2) for who in cpu if who != "window"}
    failed = f"; failed: {proxy.failed} through the gateway, {direct.failed} direct"
    return [
        Row(
            f"requests/s at {proxy.sandboxes} sandboxes, a new connection each: through the "
            "gateway vs the relay alone",
            "req/s",
            round(direct.per_second, 1),
            round(proxy.per_second, 1),
            note=f"{proxy.seconds:g} s window each; latency p50 {proxy.latency_p50_ms} ms "
            f"(relay alone {direct.latency_p50_ms} ms){failed}",
        ),
        Row(
            f"the gateway's CPU at {proxy.sandboxes} sandboxes, per request",
            "CPU ms",
            None,
            round(cpu["gateway_process"] / max(proxy.requests, 1) * 1000, 3),
            note=f"the whole benchmark process's CPU time (the gateway's thread; its main "
            f"thread sleeps): {cores['gateway_process']} cores; the relays "
            f"{cores['relays']}, the server {cores['server']}, the machine {cores['machine']}",
        ),
    ]


def result_rows(found: dict[str, Any], plan: Plan) -> list[Row]:
    rows = [
        *_startup_rows(found["startup"], plan.samples),
        *_download_rows(found["download"], plan.download_mb, plan.repeats),
        *_load_rows(found["load"]),
    ]
    for row in rows:
        row.group = GROUP
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.sandbox_gateway")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: the smoke test's")
    parser.add_argument("--samples", type=int, default=Plan.samples)
    parser.add_argument("--sandboxes", type=int, default=Plan.sandboxes)
    parser.add_argument("--seconds", type=float, default=Plan.seconds)
    parser.add_argument("--no-slirp-download", action="store_true")
    parser.add_argument("--results", type=Path, default=RESULTS_DIR, help="folder for latest.json")
    args = parser.parse_args(argv)
    plan = (
        QUICK if args.quick else Plan(args.samples, sandboxes=args.sandboxes, seconds=args.seconds)
    )
    began, started_at = time.monotonic(), datetime.now(UTC)
    # The machine's load as the run began: on a shared machine, the figures' context.
    load_average = [round(value, 2) for value in os.getloadavg()]
    found = measure(plan, slirp_download=not args.no_slirp_download)
    rows = result_rows(found, plan)
    details: dict[str, Any] = {
        "sandbox_gateway": {
            "plan": plan.__dict__,
            "load_average_at_start": load_average,
            "startup": found["startup"],
            "download": found["download"],
            "load": {mode: phase_json(phase) for mode, phase in found["load"].items()},
        }
    }
    said = sys.argv[1:] if argv is None else argv
    meta = {
        "command": " ".join(["python -m bench.sandbox_gateway", *said]),
        "machine": machine(),
        "started_at": started_at.isoformat(timespec="seconds"),
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "wall_seconds": round(time.monotonic() - began),
        "metrics": [GROUP],
    }
    _, json_path, _ = save_results(args.results, rows, details, meta)
    print(json.dumps(details["sandbox_gateway"]["download"]["mb_per_second"]))
    print(render_text(rows))
    print(f"wrote {json_path}")
    return 0 if all(row.passed is not False for row in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
