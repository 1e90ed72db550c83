"""The rows of `bench.runtime_fleet`: 1,000 concurrent Runtime runs on one key."""

from __future__ import annotations

from typing import Any

from bench.report import Row

RUNS_BY_RATE_TARGET = 2500


def fleet_rows(fleet: dict[str, Any]) -> list[Row]:
    settings = fleet["settings"]
    n, workers, streams = settings["runs"], settings["workers"], settings["streams"]
    on = f"{n:,} concurrent runtime runs on one key ({workers} workers)"
    ceiling = fleet["ceiling"]
    crash = fleet["crash_to_noticed"]
    every = crash.get("all") or {}
    ways = "; ".join(
        f"{how}: n {c['n']}, median {c['median']} s, p95 {c['p95']} s, max {c['max']} s"
        for how, c in crash.items()
        if how != "all"
    )
    how_read = (
        f"{workers} workers x {streams} streams, the rest through each worker's event feed "
        f"(a look every {settings['events_seconds']:g} s); the fake reads a webhook watch at "
        f"most once every {settings['hook_window']:g} s (Runtime does not publish its window) "
        f"and scans sandbox folders every {settings['scan_seconds']:g} s"
    )
    phases = fleet["status_429_by_phase_and_route"]
    return [
        Row(
            f"{on}: 429 answers",
            "answers",
            None,
            float(fleet["status_429"]),
            "0",
            at_most=0,
            note=(
                f"limiter at the real settings (50 req/s, bursts of 200, 128 at once, 5 s then "
                f"429); sandboxes made {settings['creates_per_second']:g} a second, first looks "
                f"{settings['starts_per_second']:g} a second; by phase and route: {phases}"
            ),
        ),
        Row(
            f"{on}: watch streams held at once, most",
            "requests",
            None,
            float(fleet["streams_held_most"]),
            f"<= {ceiling} (ceiling)",
            at_most=ceiling,
            note=(
                f"held: open at least 1 s ({fleet['streams_open_most']} counting the moment "
                f"a closed stream and the next overlap at the server); {how_read}; most "
                f"requests in flight {fleet['in_flight_most']} of 128"
            ),
        ),
        Row(
            f"{on}: crash-to-noticed, median (all runs)",
            "s",
            None,
            every.get("median"),
            note=f"{fleet['crash_samples']} crashes over {settings['crash_span']:g} s, "
            f"{fleet['crash_missing']} not noticed; by how each run was read: {ways}",
        ),
        Row(
            f"{on}: crash-to-noticed, p95 (all runs)",
            "s",
            None,
            every.get("p95"),
            note=f"max {every.get('max')} s",
        ),
        Row(
            f"{on}: runs one key sustains by rate, checkpoint every 20-30 s",
            "runs",
            None,
            None if fleet["runs_per_key_by_rate"] is None else float(fleet["runs_per_key_by_rate"]),
            f">= {RUNS_BY_RATE_TARGET}",
            at_least=RUNS_BY_RATE_TARGET,
            note=(
                f"(50 req/s x 3600 - {fleet['fixed_per_hour']:,} an hour that do not grow with "
                f"the runs: the feeds' looks and the capped streams) / "
                f"{fleet['per_run_hour']} per run-hour (the checkpoint copied once a "
                f"{settings['poll_seconds']:g} s poll); measured over a {fleet['steady_seconds']} "
                f"s window: {fleet['requests_per_run_hour']} per run-hour in all, by route "
                f"{fleet['routes_per_run_hour']}"
            ),
        ),
    ]
