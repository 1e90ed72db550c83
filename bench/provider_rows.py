"""The provider-cost rows: requests, bytes and looks per run-hour, and what one API key carries.

Figures come from `bench.provider_cost` (both systems, same window) and `bench.key_limit`
(overnight alone, 100 runs on one key). Runtime's limits (its public API reference, v0.2.0):
per key about 50 requests a second, 128 served at once; per organization 192 in flight.
"""

from __future__ import annotations

from typing import Any

from activities.providers.runtime.settings import DEFAULT_STREAMS as WORKER_STREAMS
from bench.report import Row

RATE_PER_SECOND = 50
KEY_IN_FLIGHT = 128
ORG_IN_FLIGHT = 192
REQUESTS_TARGET = 180
RUNS_TARGET = 1000


def _cell(cost: dict[str, Any], key: str, field: str) -> float | None:
    value = cost["cells"].get(key, {}).get(field)
    return None if value is None else float(value)


Pair = tuple[float | None, float | None]  # (baseline, overnight)


def _pair(cost: dict[str, Any], tail: str, field: str, scale: float = 1.0) -> Pair:
    baseline = _cell(cost, f"baseline/{tail}", field)
    overnight = _cell(cost, f"overnight/{tail}", field)
    return _scaled(baseline, scale), _scaled(overnight, scale)


def _scaled(value: float | None, scale: float) -> float | None:
    return None if value is None else round(value * scale, 4)


def _routes(cost: dict[str, Any], tail: str) -> str:
    parts = []
    for system in ("overnight", "baseline"):
        routes = cost["cells"].get(f"{system}/{tail}", {}).get("routes_per_hour", {})
        parts.append(f"{system}: " + (", ".join(f"{r} {n:g}" for r, n in routes.items()) or "-"))
    return "; ".join(parts)


def cost_rows(
    cost: dict[str, Any], key: dict[str, Any] | None, cap: dict[str, Any] | None = None
) -> list[Row]:
    s = cost["settings"]
    low, high = s["tick"]
    tick = f"checkpoint every {low:g}-{high:g} s"
    size = f"{s['checkpoint_bytes'] / 1024:g} KiB checkpoint"
    every = f"poll_seconds {s['poll_seconds']:g}, {s['runs_per_kind']} runs per system"
    window = f"{cost['window_seconds']:g} s window"
    rows = []
    for kind, what in (("ticking", tick), ("quiet", "quiet agent")):
        rows.append(
            Row(
                f"runtime requests / run-hour, {what}",
                "requests",
                *_pair(cost, f"runtime/{kind}", "requests_per_hour"),
                f"<= {REQUESTS_TARGET}",
                at_most=REQUESTS_TARGET,
                note=f"{every}, {window}; per route: {_routes(cost, f'runtime/{kind}')}",
            )
        )
    for kind, what in (("ticking", tick), ("quiet", "quiet agent")):
        rows.append(
            Row(
                f"runtime checkpoint download / run-hour, {what}",
                "KiB",
                *_pair(cost, f"runtime/{kind}", "read_bytes_per_hour", 1 / 1024),
                note=f"{size}; response bytes of file reads",
            )
        )
    for kind, what in (("ticking", tick), ("quiet", "quiet agent")):
        stamps = _pair(cost, f"local/{kind}", "stamp_per_hour")
        looks = _pair(cost, f"local/{kind}", "process_per_hour")
        kib = _pair(cost, f"local/{kind}", "read_bytes_per_hour", 1 / 1024)
        rows.append(
            Row(
                f"local checkpoint reads / run-hour, {what}",
                "reads",
                *_pair(cost, f"local/{kind}", "read_per_hour"),
                note=(
                    f"read {_fmt(kib[1])} KiB (overnight) / {_fmt(kib[0])} KiB (baseline) an "
                    f"hour; also per hour: checkpoint stats {_fmt(stamps[1])} / "
                    f"{_fmt(stamps[0])}, process looks {_fmt(looks[1])} / {_fmt(looks[0])}"
                ),
            )
        )
        quiet = kind == "quiet"
        rows.append(
            Row(
                f"local worker CPU per 1,000 runs, {what}",
                "% core",
                *_pair(cost, f"local/{kind}", "worker_cpu_per_run", 1000 * 100),
                # A quiet local run is watched by the kernel's word: no dearer than a poll.
                "ratio <= 1" if quiet else "",
                ratio_at_most=1.0 if quiet else None,
                note="worker process CPU in the window minus its own idle CPU before any run",
            )
        )
    rows += _key_rows(cost, key)
    if cap is not None:
        rows.append(_cap_row(cap))
    return rows


def _key_rows(cost: dict[str, Any], key: dict[str, Any] | None) -> list[Row]:
    rate = _pair(cost, "runtime/ticking", "requests_per_hour")
    runs_by_rate: Pair = (_runs_by_rate(rate[0]), _runs_by_rate(rate[1]))
    rows = [
        Row(
            "runtime runs one key sustains under 50 req/s (from the measured rate)",
            "runs",
            *runs_by_rate,
            f">= {RUNS_TARGET}",
            at_least=RUNS_TARGET,
            note="50 req/s x 3600 / requests per run-hour of the checkpointing agent",
        ),
    ]
    if key is None:
        return rows
    n, workers = key["settings"]["runs"], key["settings"]["workers"]
    start, steady = key["start"], key["steady"]
    on = f"{n} concurrent runtime runs on one key ({workers} workers)"
    rows += [
        Row(
            f"{on}: 429 answers",
            "answers",
            None,
            float(start["status_429"] + steady["status_429"]),
            "0",
            at_most=0,
            note=(
                f"limiter at the real settings; runs started {key['settings']['per_second']:g} "
                f"a second: {start['status_429']} while starting, {steady['status_429']} in "
                f"the {steady['seconds']:g} s window after; "
                f"{_fmt(steady['requests_per_run_hour'])} requests per run-hour at this scale"
            ),
        ),
        Row(
            f"{on}: most requests in flight",
            "requests",
            None,
            float(max(start["in_flight_max"], steady["in_flight_max"])),
            note=(
                f"limit {KEY_IN_FLIGHT} per key; mean in the window {steady['in_flight_mean']}; "
                f"most open (in flight or waiting for a slot): "
                f"{max(start['open_max'], steady['open_max'])}"
            ),
        ),
        Row(
            f"{on}: runs watched through a held stream at once, fewest",
            "runs",
            None,
            float(steady["watched_min"]),
            note=(
                f"mean {steady['watched_mean']}; each worker holds at most its streams "
                f"(OVERNIGHT_RUNTIME_STREAMS, {WORKER_STREAMS}) and reads the other runs' news "
                "from the account's events; held requests at scale: the fleet rows"
            ),
        ),
    ]
    return rows


def _cap_row(cap: dict[str, Any]) -> Row:
    n, steady = cap["settings"]["runs"], cap["steady"]
    return Row(
        f"runtime runs one worker watches through held streams ({n} started), mean",
        "runs",
        None,
        float(steady["watched_mean"]),
        f"<= {WORKER_STREAMS}",
        at_most=WORKER_STREAMS,
        note=(
            f"fewest {steady['watched_min']}, most requests in flight "
            f"{max(cap['start']['in_flight_max'], steady['in_flight_max'])}; a worker holds at "
            f"most OVERNIGHT_RUNTIME_STREAMS ({WORKER_STREAMS}) watch streams and reads the "
            "other runs' news from the account's events, so none waits for a stream"
        ),
    )


def _runs_by_rate(per_run_hour: float | None) -> float | None:
    if not per_run_hour:
        return None
    return float(round(RATE_PER_SECOND * 3600 / per_run_hour))


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"
