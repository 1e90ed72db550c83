"""Two of the gateway benchmark's measures, on real bubblewrap sandboxes of the local engine
and the real gateway (bench/gateway_world.py): start-up, and requests at many sandboxes
(the download's is bench/gateway_download.py). Each measures its baseline in the same run."""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import asdict, dataclass
from typing import Any

from activities.providers.local.engine import LocalEngine
from bench.gateway_world import NAME, World, client_command, read_cpu, wait_ended, write_whole
from bench.report import percentile

# The two kinds of sandbox network: today's (slirp4netns: a NAT to everything the worker
# reaches) and behind the gateway (no route out; the gateway's port relayed on its loopback).
KINDS = ("slirp4netns", "gateway")


def _egress(kind: str) -> list[str] | None:
    return [NAME] if kind == "gateway" else None


def measure_startup(engine: LocalEngine, samples: int) -> dict[str, dict[str, list[float]]]:
    """Seconds to create a sandbox, to run its first command (`true`) and to start an agent
    in it (until its launcher reports it running), by kind; the kinds interleaved, each first
    in every other sample, so the machine's load falls on both alike."""
    found: dict[str, dict[str, list[float]]] = {
        kind: {"create": [], "first_command": [], "agent": []} for kind in KINDS
    }
    for i in range(samples):
        for kind in KINDS if i % 2 == 0 else tuple(reversed(KINDS)):
            name = f"up-{kind[:4]}-{i}"
            began = time.perf_counter()
            engine.get_or_create(name, timeout_seconds=600, egress=_egress(kind))
            created = time.perf_counter()
            done = engine.run(name, "true")
            ran = time.perf_counter()
            if done.exit_code != 0:
                raise RuntimeError(f"`true` failed in a {kind} sandbox: {done.stderr}")
            engine.start_process(name, f"{name}-agent", "sleep 0.2")
            found[kind]["create"].append(created - began)
            found[kind]["first_command"].append(ran - began)
            found[kind]["agent"].append(time.perf_counter() - ran)
            engine.stop(name)
    return found


@dataclass
class Phase:
    """One window of every sandbox's request loop, in one mode."""

    mode: str
    sandboxes: int
    seconds: float
    requests: int
    failed: int
    errors: dict[str, int]
    latency_p50_ms: float | None
    latency_p99_ms: float | None
    cpu_seconds: dict[str, float]

    @property
    def per_second(self) -> float:
        return self.requests / self.seconds


def measure_load(world: World, sandboxes: int, seconds: float) -> dict[str, Phase]:
    """Requests a second when `sandboxes` sandboxes behind the gateway each make short
    requests one after another, each on a new connection: first straight to the server
    through their relay (`host_ports`), then through the gateway; the CPU of each part."""
    engine = world.engine
    names = [f"load-{i}" for i in range(sandboxes)]
    for name in names:
        engine.get_or_create(name, timeout_seconds=3600, egress=[NAME], host_ports=[world.port])
    return {mode: _phase(world, names, mode, seconds) for mode in ("direct", "proxy")}


def _phase(world: World, names: list[str], mode: str, seconds: float) -> Phase:
    engine = world.engine
    go, out = f"/workspace/go-{mode}", f"/workspace/out-{mode}.json"
    command = client_command(mode, world.port, go, out, seconds)
    started = {name: engine.start_process(name, f"{name}-{mode}", command)[0] for name in names}
    start_at = time.time() + 1.0
    for name in names:  # the same start for all
        write_whole(engine.folder(name) / "workspace" / f"go-{mode}", f"{start_at}\n")
    time.sleep(max(0.0, start_at - time.time()))
    before = read_cpu(world)
    time.sleep(seconds)
    after = read_cpu(world)
    for name, record in started.items():
        wait_ended(engine, name, record.process_id)
    counted = [
        json.loads((engine.folder(name) / "workspace" / f"out-{mode}.json").read_text())
        for name in names
    ]
    errors: dict[str, int] = {}
    for said in counted:
        for kind, n in said["errors"].items():
            errors[kind] = errors.get(kind, 0) + n
    p50s = [said["latency_p50_p99"][0] for said in counted if said["latency_p50_p99"]]
    p99s = [said["latency_p50_p99"][1] for said in counted if said["latency_p50_p99"]]
    window = after.at - before.at
    return Phase(
        mode=mode,
        sandboxes=len(names),
        seconds=seconds,
        requests=sum(said["ok"] for said in counted),
        failed=sum(said["failed"] for said in counted),
        errors=errors,
        latency_p50_ms=round(statistics.median(p50s) * 1000, 2) if p50s else None,
        latency_p99_ms=round(max(p99s) * 1000, 2) if p99s else None,
        cpu_seconds={
            "window": round(window, 3),
            "gateway_process": round(after.gateway - before.gateway, 3),
            "relays": round(after.relays - before.relays, 3),
            "server": round(after.server - before.server, 3),
            "machine": round(after.machine - before.machine, 3),
        },
    )


def phase_json(phase: Phase) -> dict[str, Any]:
    return asdict(phase) | {"per_second": round(phase.per_second, 1)}


def summary(values: list[float]) -> dict[str, float]:
    return {"median": round(percentile(values, 50), 4), "p90": round(percentile(values, 90), 4)}
