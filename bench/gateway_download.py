"""The gateway benchmark's download: MB/s of the loopback server's file by path, and the CPU
each part of the path spends on it.

In a sandbox, curl runs as an agent (not a command) so that its relay, which lives as long
as the agent, can be read before and after the download: the agent waits for a file `go`,
downloads, says what curl measured, and waits for a file `end`.
"""

from __future__ import annotations

import statistics
import subprocess
import time
from typing import Any

from bench.gateway_world import NAME, World, read_cpu, wait_ended, write_whole

CURL_FORMAT = "%{size_download} %{time_total}"
WAIT_STEP = 0.02
DOWNLOAD_WAIT_SECONDS = 300.0
# Every path, in the order each round takes them.
PATHS = ("host", "relay", "gateway", "slirp4netns")


def _curl_result(said: str, size: int) -> float:
    try:
        got, seconds = said.split()[-2:]
    except ValueError:
        raise RuntimeError(f"curl said {said!r}") from None
    if int(got) != size:
        raise RuntimeError(f"curl got {got} bytes of {size}: {said!r}")
    return float(seconds)


def _on_host(world: World) -> tuple[float, dict[str, float]]:
    argv = ["curl", "-sS", "-o", "/dev/null", "--noproxy", "*", "-w", CURL_FORMAT]
    done = subprocess.run([*argv, world.url("127.0.0.1")], capture_output=True, text=True)
    return _curl_result(done.stdout + done.stderr, world.file_bytes), {}


def _in_sandbox(
    world: World, sid: str, url: str, tag: str, *, proxy: bool = False
) -> tuple[float, dict[str, float]]:
    """curl's seconds, and the CPU seconds of the gateway's process and of the relays while
    it downloaded (a relay starts with the agent and ends with it: read in between)."""
    engine, workspace = world.engine, world.engine.folder(sid) / "workspace"
    noproxy = "" if proxy else "--noproxy '*' "
    command = (
        f"while [ ! -e go-{tag} ]; do sleep {WAIT_STEP}; done; "
        f"curl -sS -o /dev/null {noproxy}-w '{CURL_FORMAT}' {url} > .said-{tag} 2>&1; "
        f"mv .said-{tag} said-{tag}; "
        f"while [ ! -e end-{tag} ]; do sleep {WAIT_STEP}; done"
    )
    record, _ = engine.start_process(sid, f"{sid}-{tag}", command)
    before = read_cpu(world)
    write_whole(workspace / f"go-{tag}", "go\n")
    give_up = time.monotonic() + DOWNLOAD_WAIT_SECONDS
    while not (workspace / f"said-{tag}").exists():
        if time.monotonic() > give_up:
            raise RuntimeError(f"the download of {tag} in {sid} did not end")
        time.sleep(WAIT_STEP)
    after = read_cpu(world)
    write_whole(workspace / f"end-{tag}", "end\n")
    wait_ended(engine, sid, record.process_id)
    said = (workspace / f"said-{tag}").read_text()
    for name in (f"go-{tag}", f"said-{tag}", f"end-{tag}"):
        (workspace / name).unlink()
    cpu = {"gateway": after.gateway - before.gateway, "relays": after.relays - before.relays}
    return _curl_result(said, world.file_bytes), cpu


def measure_download(world: World, repeats: int, own_address: str | None) -> dict[str, Any]:
    """MB/s of the server's file, by path, interleaved: curl on the host (no sandbox); curl
    in a sandbox behind the gateway, straight to the server through its `host_ports` relay
    (`relay`) and through the gateway's proxy (`gateway`: the same sandbox, a relay of the
    same code); and, when this machine has an address besides loopback, curl in today's
    slirp4netns sandbox to it. With the CPU seconds each download cost the gateway's process
    and the relay."""
    engine = world.engine
    engine.get_or_create("dl-gateway", timeout_seconds=3600, egress=[NAME], host_ports=[world.port])
    if own_address:
        engine.get_or_create("dl-slirp", timeout_seconds=3600)
    seconds: dict[str, list[float]] = {path: [] for path in PATHS}
    cpu: dict[str, dict[str, list[float]]] = {}
    for i in range(repeats):
        for path in PATHS:
            if path == "host":
                took, used = _on_host(world)
            elif path == "relay":
                took, used = _in_sandbox(world, "dl-gateway", world.url("127.0.0.1"), f"relay{i}")
            elif path == "gateway":
                took, used = _in_sandbox(
                    world, "dl-gateway", world.url(), f"gateway{i}", proxy=True
                )
            elif own_address:
                url = world.url(own_address)
                took, used = _in_sandbox(world, "dl-slirp", url, f"slirp{i}")
            else:
                continue
            seconds[path].append(took)
            for who, value in used.items():
                cpu.setdefault(path, {}).setdefault(who, []).append(value)
    size = world.file_bytes
    return {
        "bytes": size,
        "seconds": {path: values for path, values in seconds.items() if values},
        "mb_per_second": {
            path: round(size / 1e6 / statistics.median(values), 1)
            for path, values in seconds.items()
            if values
        },
        # Per download, median: the gateway's is this whole process's (its thread, and a main
        # thread that waits); the relays' is every relay's (one runs: the agent's).
        "cpu_seconds": {
            path: {who: round(statistics.median(v), 3) for who, v in used.items()}
            for path, used in cpu.items()
        },
    }
