"""What a local sandbox's network of its own costs to start: `python -m bench.sandbox_network`.

Every isolated local command and agent starts in a new network namespace into which
slirp4netns (and, with `host_ports`, the relay) is plugged before it runs. Measured here on
the local engine itself, in the same run and interleaved: a command (`true`) and an agent
start (`start_process`, until its launcher reports it running) in a sandbox with its own
network, with its own network and one host port, and, as the baseline, sharing the worker's
network (what every sandbox did before). Rows (group `network`) go into
bench/results/latest.json beside the suite's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from activities.providers.local.engine import LocalEngine
from bench.report import RESULTS_DIR, Row, machine, render_text, save_results
from overnight.core.home import HOME_ENV

# Added start-up a sandbox process may pay for its own network, in seconds (a crash's
# recovery starts one agent and about a dozen commands).
ADDED_COMMAND_TARGET = 0.25
KINDS = ("host", "own", "own+port")


def _sandbox(engine: LocalEngine, kind: str, name: str, port: int) -> str:
    engine.get_or_create(
        name,
        labels={"overnight-run": name},
        timeout_seconds=3600,
        network="host" if kind == "host" else "own",
        host_ports=[port] if kind == "own+port" else [],
    )
    return name


def measure(samples: int) -> dict[str, dict[str, list[float]]]:
    """Seconds per command and per agent start, by kind of network."""
    engine = LocalEngine()
    port = 9  # the discard port: the relay listens for it; nothing needs to answer
    boxes = {kind: _sandbox(engine, kind, f"net-{kind.replace('+', '-')}", port) for kind in KINDS}
    found: dict[str, dict[str, list[float]]] = {k: {"command": [], "agent": []} for k in KINDS}
    for i in range(samples):
        for kind in KINDS:  # interleaved: the machine's load falls on all three alike
            sid = boxes[kind]
            began = time.perf_counter()
            engine.run(sid, "true")
            found[kind]["command"].append(time.perf_counter() - began)
            began = time.perf_counter()
            engine.start_process(sid, f"{sid}-{i}-0", "sleep 0.2")
            found[kind]["agent"].append(time.perf_counter() - began)
    for sid in boxes.values():
        engine.stop(sid)
    return found


def _median(values: list[float]) -> float:
    return round(statistics.median(values), 4)


def result_rows(found: dict[str, dict[str, list[float]]]) -> list[Row]:
    rows = []
    for step, what in (("command", "a command (`true`)"), ("agent", "an agent start")):
        base = _median(found["host"][step])
        for kind, label in (("own", "own network"), ("own+port", "own network + a host port")):
            value = _median(found[kind][step])
            rows.append(
                Row(
                    f"sandbox start-up, {what}: {label} vs shared",
                    "s",
                    base,
                    value,
                    target=f"adds <= {ADDED_COMMAND_TARGET} s",
                    at_most=round(base + ADDED_COMMAND_TARGET, 4),
                    note=f"median of {len(found[kind][step])}; baseline: the worker's network",
                )
            )
    for row in rows:
        row.group = "network"
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.sandbox_network")
    parser.add_argument("--samples", type=int, default=30)
    parser.add_argument("--results", type=Path, default=RESULTS_DIR, help="folder for latest.json")
    args = parser.parse_args(argv)
    began, started_at = time.monotonic(), datetime.now(UTC)
    os.environ[HOME_ENV] = tempfile.mkdtemp(prefix="overnight-bench-network-")
    found = measure(args.samples)
    rows = result_rows(found)
    details: dict[str, Any] = {
        "sandbox_network": {
            kind: {step: [round(v, 4) for v in values] for step, values in steps.items()}
            for kind, steps in found.items()
        }
    }
    meta = {
        "command": "python -m bench.sandbox_network"
        + (f" --samples {args.samples}" if args.samples != 30 else ""),
        "machine": machine(),
        "started_at": started_at.isoformat(timespec="seconds"),
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "wall_seconds": round(time.monotonic() - began),
        "metrics": ["network"],
    }
    _, json_path, _ = save_results(args.results, rows, details, meta)
    print(json.dumps({k: {s: _median(v) for s, v in d.items()} for k, d in found.items()}))
    print(render_text(rows))
    print(f"wrote {json_path}")
    return 0 if all(row.passed for row in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
