"""What the gateway's model routes add to a model call: `python -m bench.model_routes [--quick]`.

The fake model API (`python -m fakes.model_api`, its own process) answers every request with
the same turn of known usage; a real gateway (bench/model_routes_server.py, its own process,
as it runs on the worker's thread) forwards to it for a sandbox record written by hand. The
client (bench/model_routes_client.py) calls the fake directly and through the gateway, in
alternating rounds so the machine's load falls on both alike:

1. a whole (not streamed) Anthropic Messages answer, timed to its last byte, and a streamed
   one, timed to its first event, at 1 connection, at 50 back to back (the upstream answers
   at once and each connection calls again as soon as it has its answer: 50 calls always
   wait on the gateway's one thread, so this measures its throughput, and on this machine's
   2 cores the client, the fake and the gateway share them), and at 50 paced like agents
   (a second fake answers after `upstream_seconds`, and each connection waits a random
   0-2x`think` before each call, as an agent runs its tools: 50 calls open at once, as 50
   agents' would be): median and p99 of each path, the gateway's added latency is the
   difference; and the calls per second of each path back to back;
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
from overnight.core.model_prices import DEFAULT_PRICES, Usage, usd_of

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
    paced_rounds: int = 2
    paced_each: int = 6  # requests a connection, a round, paced like agents
    # Paced like agents: the upstream answers after this (a model's time to its first byte is
    # seconds; this is less, so more calls arrive at once than agents would send), and each
    # connection waits 0 to twice `think` before each call (its agent's tools running).
    upstream_seconds: float = 0.5
    think: float = 0.25


QUICK = Plan(
    rounds=1, alone=5, crowd=3, crowd_each=2, paced_rounds=1, paced_each=1, upstream_seconds=0.05
)


def _start(command: list[str], env: dict[str, str]) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env)
    assert process.stdout is not None
    return process, process.stdout.readline().strip()


def _fake(scratch: Path, name: str, delay: float, env: dict[str, str]) -> tuple[Any, int]:
    script = scratch / f"{name}.json"
    turn = {"text": "done", "times": 10**6, **TURN, **({"delay_seconds": delay} if delay else {})}
    script.write_text(json.dumps([turn]))
    command = [sys.executable, "-m", "fakes.model_api", "--script", str(script), "--honour-stream"]
    fake, said = _start(command, env)
    return fake, int(said.split("http://127.0.0.1:", 1)[1].split(":", 1)[0].split()[0])


def measure(plan: Plan) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-model-routes-") as scratch:
        home = Path(scratch) / "home"
        env = {**os.environ, KEY_ENV: "sk-bench", "PYTHONPATH": str(Path.cwd())}
        processes = []
        try:
            fake, fake_port = _fake(Path(scratch), "at-once", 0.0, env)
            processes.append(fake)
            paced, paced_port = _fake(Path(scratch), "paced", plan.upstream_seconds, env)
            processes.append(paced)
            gateway, port_text = _start(
                [sys.executable, "-m", "bench.model_routes_server", str(home)], env
            )
            processes.append(gateway)
            upstreams = {RUN_ID: fake_port, PACED_RUN_ID: paced_port}
            return _measure(plan, home, upstreams, int(port_text), gateway.pid)
        finally:
            for process in reversed(processes):
                process.terminate()
                process.wait(timeout=30)
                if process.stdout is not None:
                    process.stdout.close()


RUN_ID, PACED_RUN_ID = "bench", "bench-paced"


def _token_for(home: Path, sandbox: str, run_id: str, upstream_port: int) -> str:
    folder = home / "sandboxes" / sandbox
    folder.mkdir(parents=True)
    model = {
        "upstream": f"http://127.0.0.1:{upstream_port}",
        "credential_env": KEY_ENV,
        "run_id": run_id,
        "cap_usd": None,
    }
    (folder / "sandbox.json").write_text(json.dumps({"state": "running", "model": model}))
    return model_token(home, sandbox)


def _measure(
    plan: Plan, home: Path, upstreams: dict[str, int], port: int, gateway_pid: int
) -> dict[str, Any]:
    tokens = {
        run_id: _token_for(home, f"{run_id}-1", run_id, upstream)
        for run_id, upstream in upstreams.items()
    }
    found: dict[str, Any] = {}
    cpu = 0.0
    through = 0
    # (name, run, connections, requests a connection a round, rounds, think)
    loads = [
        ("1", RUN_ID, 1, plan.alone, plan.rounds, 0.0),
        (f"{plan.crowd}", RUN_ID, plan.crowd, plan.crowd_each, plan.rounds, 0.0),
        (f"{plan.crowd}paced", PACED_RUN_ID, plan.crowd, plan.paced_each, plan.paced_rounds, 1.0),
    ]
    for streamed in (False, True):
        body = {
            "model": MODEL,
            "max_tokens": 64,
            "stream": streamed,
            "messages": [{"role": "user", "content": "hi"}],
        }
        for name, run_id, concurrent, each, rounds, paced in loads:
            upstream = upstreams[run_id]
            asks = {
                "direct": request_bytes(
                    upstream, "/v1/messages", {"anthropic-version": "2023-06-01"}, body
                ),
                "gateway": request_bytes(
                    port,
                    "/model/v1/messages",
                    {"x-api-key": tokens[run_id], "anthropic-version": "2023-06-01"},
                    body,
                ),
            }
            ports = {"direct": upstream, "gateway": port}
            times = {"direct": Timings(), "gateway": Timings()}
            walls = {"direct": 0.0, "gateway": 0.0}
            for i in range(rounds):
                for path in ("direct", "gateway") if i % 2 == 0 else ("gateway", "direct"):
                    before, began = cpu_seconds(gateway_pid), time.monotonic()
                    got = run(
                        ports[path],
                        asks[path],
                        concurrent,
                        each,
                        first_byte=streamed,
                        think=plan.think * paced,
                    )
                    walls[path] += time.monotonic() - began
                    if path == "gateway":
                        cpu += cpu_seconds(gateway_pid) - before
                        through += len(got.seconds) + got.failed
                    times[path].seconds += got.seconds
                    times[path].failed += got.failed
            found[f"{'stream' if streamed else 'whole'}@{name}"] = {
                path: {
                    "median_ms": round(percentile(t.seconds, 50) * 1000, 3),
                    "p99_ms": round(percentile(t.seconds, 99) * 1000, 3),
                    "count": len(t.seconds),
                    "failed": t.failed,
                    "per_second": round(len(t.seconds) / max(walls[path], 1e-9), 1),
                }
                for path, t in times.items()
            }
    time.sleep(0.2)
    booked = answers = 0.0
    for run_id in upstreams:
        usd, count = spend_of(home, run_id)
        booked, answers = booked + usd, answers + count
    return {
        "latency": found,
        "gateway_cpu_seconds": round(cpu, 4),
        "gateway_requests": through,
        "booked_usd": booked,
        "booked_answers": int(answers),
        "scripted_usd": SCRIPTED * answers,
    }


def result_rows(found: dict[str, Any], plan: Plan) -> list[Row]:
    rows = []
    for key, what in (
        ("whole", "a whole answer, to its last byte"),
        ("stream", "a stream, to its first event"),
    ):
        loads = (
            ("1", "1 at once", ""),
            (
                f"{plan.crowd}",
                f"{plan.crowd} at once back to back",
                "; the upstream answers at once and each connection calls again as soon as it "
                f"has its answer, so {plan.crowd} calls are always waiting on the gateway's one "
                "thread: this measures its throughput (added ~ connections x CPU per call / "
                "cores), on 2 cores shared by the client, the fake and the gateway",
            ),
            (
                f"{plan.crowd}paced",
                f"{plan.crowd} at once paced like agents",
                f"; the upstream answers after {plan.upstream_seconds:g} s and each connection "
                f"waits 0-{2 * plan.think:g} s before each call (its agent's tools), so "
                f"{plan.crowd} calls are open at once as {plan.crowd} agents' would be",
            ),
        )
        for load, said, how in loads:
            seen = found["latency"][f"{key}@{load}"]
            direct, gateway = seen["direct"], seen["gateway"]
            for stat, target in (("median", MEDIAN_TARGET_MS), ("p99", P99_TARGET_MS)):
                base, value = direct[f"{stat}_ms"], gateway[f"{stat}_ms"]
                rows.append(
                    Row(
                        f"model call, {what}, {said}, {stat}: "
                        "through the gateway vs the upstream directly",
                        "ms",
                        base,
                        value,
                        target=f"adds <= {target:g} ms",
                        at_most=round(base + target, 3),
                        note=f"{gateway['count']} requests each way ({gateway['failed']} failed "
                        f"through the gateway, {direct['failed']} directly), connections kept "
                        f"open; the upstream is the fake model API on the loopback{how}",
                    )
                )
        seen = found["latency"][f"{key}@{plan.crowd}"]
        rows.append(
            Row(
                f"model calls/s, {what.split(',')[0]}, {plan.crowd} at once back to back: "
                "through the gateway vs the upstream directly",
                "calls/s",
                seen["direct"]["per_second"],
                seen["gateway"]["per_second"],
                note="the fake (a Python thread per connection), the client and the gateway "
                "share 2 cores",
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
