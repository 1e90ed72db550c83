"""What the gateway's model routes add to a model call: `python -m bench.model_routes [--quick]`.

The fake model API (`python -m fakes.model_api`, its own process) answers every request with
the same turn of known usage; a real gateway (bench/model_routes_server.py, its own process,
as it runs on the worker's thread) forwards to it for a sandbox record written by hand. The
client (bench/model_routes_client.py) calls the fake directly and through the gateway, in
alternating rounds so the machine's load falls on both alike:

1. a whole (not streamed) Anthropic Messages answer, timed to its last byte, and a streamed
   one, timed to its first event, at 1 and at 50 concurrent connections (each kept open, as
   the CLIs keep theirs): median and p99 of each path, the gateway's added latency is the
   difference;
2. the gateway process's CPU per 1,000 requests;
3. the spend booked in the run's ledger vs the fake's scripted usage at the price table.

Rows (group `modelroutes`) go into bench/results/latest.json beside the suite's.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from activities.gateway.service import model_token, spend_of
from bench.model_routes_client import Timings, request_bytes, run
from bench.procs import cpu_seconds
from bench.report import RESULTS_DIR, Row, machine, percentile, render_text, save_results
from overnight.model_prices import DEFAULT_PRICES, Usage, usd_of

GROUP = "modelroutes"
MEDIAN_TARGET_MS, P99_TARGET_MS = 2.0, 10.0
KEY_ENV = "OVERNIGHT_BENCH_MODEL_KEY"
MODEL = "claude-sonnet-4-5"
TURN = {"input_tokens": 1200, "output_tokens": 345, "cache_read_tokens": 20_000}
SCRIPTED = usd_of(
    DEFAULT_PRICES["claude-sonnet-4"],
    Usage(input_tokens=1200, output_tokens=345, cache_read_tokens=20_000),
)


@dataclass(frozen=True)
class Plan:
    rounds: int = 4
    alone: int = 100  # requests a round at 1 connection
    crowd: int = 50  # connections at once
    crowd_each: int = 10  # requests a connection, a round


QUICK = Plan(rounds=1, alone=5, crowd=3, crowd_each=2)


def _start(command: list[str], env: dict[str, str]) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env)
    assert process.stdout is not None
    return process, process.stdout.readline().strip()


def measure(plan: Plan) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-model-routes-") as scratch:
        home = Path(scratch) / "home"
        script = Path(scratch) / "script.json"
        script.write_text(json.dumps([{"text": "done", "times": 10**6, **TURN}]))
        env = {**os.environ, KEY_ENV: "sk-bench", "PYTHONPATH": str(Path.cwd())}
        fake, said = _start(
            [sys.executable, "-m", "fakes.model_api", "--script", str(script), "--honour-stream"],
            env,
        )
        gateway, port_text = _start(
            [sys.executable, "-m", "bench.model_routes_server", str(home)], env
        )
        try:
            fake_port = int(said.split("http://127.0.0.1:", 1)[1].split(":", 1)[0].split()[0])
            return _measure(plan, home, fake_port, int(port_text), gateway.pid)
        finally:
            for process in (gateway, fake):
                process.terminate()
                process.wait(timeout=30)
                if process.stdout is not None:
                    process.stdout.close()


def _measure(plan: Plan, home: Path, fake_port: int, port: int, gateway_pid: int) -> dict[str, Any]:
    sandbox, run_id = "bench-1", "bench"
    folder = home / "sandboxes" / sandbox
    folder.mkdir(parents=True)
    model = {
        "upstream": f"http://127.0.0.1:{fake_port}",
        "credential_env": KEY_ENV,
        "run_id": run_id,
        "cap_usd": None,
    }
    (folder / "sandbox.json").write_text(json.dumps({"state": "running", "model": model}))
    token = model_token(home, sandbox)
    found: dict[str, Any] = {}
    cpu = 0.0
    through = 0
    for streamed in (False, True):
        body = {
            "model": MODEL,
            "max_tokens": 64,
            "stream": streamed,
            "messages": [{"role": "user", "content": "hi"}],
        }
        asks = {
            "direct": request_bytes(
                fake_port, "/v1/messages", {"anthropic-version": "2023-06-01"}, body
            ),
            "gateway": request_bytes(
                port,
                "/model/v1/messages",
                {"x-api-key": token, "anthropic-version": "2023-06-01"},
                body,
            ),
        }
        ports = {"direct": fake_port, "gateway": port}
        for concurrent, each in ((1, plan.alone), (plan.crowd, plan.crowd_each)):
            times = {"direct": Timings(), "gateway": Timings()}
            for i in range(plan.rounds):
                for path in ("direct", "gateway") if i % 2 == 0 else ("gateway", "direct"):
                    before = cpu_seconds(gateway_pid)
                    got = run(ports[path], asks[path], concurrent, each, first_byte=streamed)
                    if path == "gateway":
                        cpu += cpu_seconds(gateway_pid) - before
                        through += len(got.seconds) + got.failed
                    times[path].seconds += got.seconds
                    times[path].failed += got.failed
            found[f"{'stream' if streamed else 'whole'}@{concurrent}"] = {
                path: {
                    "median_ms": round(percentile(t.seconds, 50) * 1000, 3),
                    "p99_ms": round(percentile(t.seconds, 99) * 1000, 3),
                    "count": len(t.seconds),
                    "failed": t.failed,
                }
                for path, t in times.items()
            }
    time.sleep(0.2)
    booked, answers = spend_of(home, run_id)
    return {
        "latency": found,
        "gateway_cpu_seconds": round(cpu, 4),
        "gateway_requests": through,
        "booked_usd": booked,
        "booked_answers": answers,
        "scripted_usd": SCRIPTED * answers,
    }


def result_rows(found: dict[str, Any], plan: Plan) -> list[Row]:
    rows = []
    for key, what in (
        ("whole", "a whole answer, to its last byte"),
        ("stream", "a stream, to its first event"),
    ):
        for concurrent in (1, plan.crowd):
            seen = found["latency"][f"{key}@{concurrent}"]
            direct, gateway = seen["direct"], seen["gateway"]
            for stat, target in (("median", MEDIAN_TARGET_MS), ("p99", P99_TARGET_MS)):
                base, value = direct[f"{stat}_ms"], gateway[f"{stat}_ms"]
                rows.append(
                    Row(
                        f"model call, {what}, {concurrent} at once, {stat}: "
                        "through the gateway vs the upstream directly",
                        "ms",
                        base,
                        value,
                        target=f"adds <= {target:g} ms",
                        at_most=round(base + target, 3),
                        note=f"{gateway['count']} requests each way ({gateway['failed']} failed "
                        f"through the gateway, {direct['failed']} directly), connections kept "
                        "open; the upstream is the fake model API on the loopback",
                    )
                )
    requests = max(found["gateway_requests"], 1)
    rows.append(
        Row(
            "the gateway's CPU per 1,000 model calls",
            "CPU s",
            None,
            round(found["gateway_cpu_seconds"] / requests * 1000, 3),
            note=f"the gateway process's CPU over its {requests} requests, whole and streamed",
        )
    )
    rows.append(
        Row(
            "model spend booked by the gateway vs the fake's scripted usage at the price table",
            "USD",
            round(found["scripted_usd"], 6),
            round(found["booked_usd"], 6),
            target="exact",
            at_most=round(found["scripted_usd"], 6),
            at_least=round(found["scripted_usd"], 6),
            note=f"{found['booked_answers']} answers booked, each {TURN} of {MODEL}",
        )
    )
    for row in rows:
        row.group = GROUP
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.model_routes")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: the smoke test's")
    parser.add_argument("--results", type=Path, default=RESULTS_DIR, help="folder for latest.json")
    args = parser.parse_args(argv)
    plan = QUICK if args.quick else Plan()
    began, started_at = time.monotonic(), datetime.now(UTC)
    load_average = [round(value, 2) for value in os.getloadavg()]
    found = measure(plan)
    rows = result_rows(found, plan)
    details = {
        "model_routes": {"plan": plan.__dict__, "load_average_at_start": load_average, **found}
    }
    said = sys.argv[1:] if argv is None else argv
    meta = {
        "command": " ".join(["python -m bench.model_routes", *said]),
        "machine": machine(),
        "started_at": started_at.isoformat(timespec="seconds"),
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "wall_seconds": round(time.monotonic() - began),
        "metrics": [GROUP],
    }
    _, json_path, _ = save_results(args.results, rows, details, meta)
    print(render_text(rows))
    print(f"wrote {json_path}")
    return 0 if all(row.passed is not False for row in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
