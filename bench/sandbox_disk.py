"""What a local sandbox's disk limit costs: `python -m bench.sandbox_disk`.

Every attempt makes a sandbox (a crash's recovery makes one), and every stop deletes one. With
a loop-mounted image (a root worker) the create also makes a sparse ext4 image, mounts it and
binds three folders of it; the stop unmounts it and deletes one file. Measured on the local
engine itself, interleaved with the baseline, a sandbox with no disk limit (what every sandbox
was before): its create and its stop. And where no image can be had, the watch's measure of
a sandbox of 100,000 files (what sets how often a sandbox is measured). With images, a coding
agent's sandbox too, whose run's session store is an image of its own (run_store): the run's
first create makes both images, a later one finds the store's mounted; against the image
alone, and what freeing the store at the run's end costs. Rows (group `disk`) go into
bench/results/latest.json beside the suite's.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from activities.providers.local import disk_image, disk_watch, run_store
from activities.providers.local.disk_limit import DISK_ENV, MIB
from activities.providers.local.engine import LocalEngine
from activities.providers.protocol import WorkerMount
from bench.report import RESULTS_DIR, Row, machine, render_text, save_results
from overnight.core.home import HOME_ENV

# What the limit may add to a create or a stop, in seconds.
ADDED_TARGET = 0.25
# One measure of 100,000 files, at most, in seconds.
MEASURE_TARGET = 1.0
FILES = 100_000


def measure_create(samples: int, modes: tuple[str, ...]) -> dict[str, dict[str, list[float]]]:
    """Seconds per create and per stop, by disk mode ("off": no limit)."""
    engine = LocalEngine()
    found: dict[str, dict[str, list[float]]] = {m: {"create": [], "stop": []} for m in modes}
    for i in range(samples):
        for mode in modes:  # interleaved: the machine's load falls on every mode alike
            os.environ[DISK_ENV] = mode
            name = f"disk-{mode}-{i}"
            began = time.perf_counter()
            engine.get_or_create(name, labels={"overnight-run": name}, disk_mib=4096)
            found[mode]["create"].append(time.perf_counter() - began)
            began = time.perf_counter()
            engine.stop(name)
            found[mode]["stop"].append(time.perf_counter() - began)
    return found


def measure_store(samples: int) -> dict[str, list[float]]:
    """Seconds per create of a coding agent's sandbox with its run's session store (the run's
    first: both images made; a later one: the store's found mounted), interleaved with the
    image alone, and per free of the store at the run's end."""
    engine = LocalEngine()
    os.environ[DISK_ENV] = "image"
    found: dict[str, list[float]] = {"image": [], "first": [], "later": [], "free": []}
    for i in range(samples):
        began = time.perf_counter()
        engine.get_or_create(f"alone-{i}", labels={"overnight-run": f"alone-{i}"}, disk_mib=4096)
        found["image"].append(time.perf_counter() - began)
        engine.stop(f"alone-{i}")
        run = f"store-{i}"
        store = engine.home / "sessions" / run
        mounts = (WorkerMount(source=str(store), target="/overnight/session", writable=True),)
        for attempt, key in ((1, "first"), (2, "later")):
            name = f"{run}-{attempt}"
            began = time.perf_counter()
            engine.get_or_create(name, labels={"overnight-run": run}, disk_mib=4096, mounts=mounts)
            found[key].append(time.perf_counter() - began)
            engine.stop(name)
        began = time.perf_counter()
        run_store.free(store, engine.trash_dir)
        found["free"].append(time.perf_counter() - began)
    return found


def store_rows(found: dict[str, list[float]]) -> list[Row]:
    base = _median(found["image"])
    rows = [
        Row(
            f"local sandbox create with its run's session store ({what}) vs its image alone",
            "s",
            base,
            _median(found[key]),
            target=f"adds <= {ADDED_TARGET} s",
            at_most=round(base + ADDED_TARGET, 4),
            note=f"median of {len(found[key])}; 4 GiB limit, 512 MiB of it the store's",
        )
        for key, what in (("first", "the run's first: two images"), ("later", "a later one"))
    ]
    rows.append(
        Row(
            "freeing a run's session store at its end (unmount, delete its image)",
            "s",
            None,
            _median(found["free"]),
            target=f"<= {ADDED_TARGET} s",
            at_most=ADDED_TARGET,
            note=f"median of {len(found['free'])}",
        )
    )
    for row in rows:
        row.group = "disk"
    return rows


def measure_watch(folder: Path, samples: int) -> list[float]:
    """Seconds per measure of a sandbox holding `FILES` files in 1,000 folders."""
    workspace = folder / "workspace"
    for d in range(FILES // 100):
        (workspace / f"d{d}").mkdir(parents=True)
        for f in range(99):
            (workspace / f"d{d}" / f"f{f}").touch()
    seconds = []
    for _ in range(samples):
        found = disk_watch.measure(folder, 1024 * 1024 * MIB, 10 * FILES)
        assert found.entries == FILES and not found.over
        seconds.append(found.seconds)
    return seconds


def _median(values: list[float]) -> float:
    return round(statistics.median(values), 4)


def result_rows(found: dict[str, dict[str, list[float]]], watch: list[float]) -> list[Row]:
    rows = []
    for mode, label in (("image", "its own ext4 image"), ("watch", "measured")):
        if mode not in found:
            continue
        for step in ("create", "stop"):
            base, value = _median(found["off"][step]), _median(found[mode][step])
            rows.append(
                Row(
                    f"local sandbox {step}, disk limited ({label}) vs not limited",
                    "s",
                    base,
                    value,
                    target=f"adds <= {ADDED_TARGET} s",
                    at_most=round(base + ADDED_TARGET, 4),
                    note=f"median of {len(found[mode][step])}; 4 GiB limit",
                )
            )
    value = _median(watch)
    rows.append(
        Row(
            f"disk watch: one measure of a sandbox of {FILES:,} files",
            "s",
            None,
            value,
            target=f"<= {MEASURE_TARGET} s",
            at_most=MEASURE_TARGET,
            note=f"median of {len(watch)}; then measured every "
            f"{disk_watch.interval_after(disk_watch.Measure(0, 0, False, value)):.0f} s",
        )
    )
    for row in rows:
        row.group = "disk"
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.sandbox_disk")
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument("--results", type=Path, default=RESULTS_DIR, help="folder for latest.json")
    args = parser.parse_args(argv)
    began, started_at = time.monotonic(), datetime.now(UTC)
    home = Path(tempfile.mkdtemp(prefix="overnight-bench-disk-"))
    os.environ[HOME_ENV] = str(home)
    images = disk_image.unavailable(home) is None
    try:
        found = measure_create(
            args.samples, ("off", "image", "watch") if images else ("off", "watch")
        )
        watch = measure_watch(home / "watched", 5)
        store = measure_store(args.samples) if images else {}
    finally:
        disk_image.detach(home)
        shutil.rmtree(home, ignore_errors=True)
    rows = result_rows(found, watch) + (store_rows(store) if store else [])
    details: dict[str, Any] = {
        "sandbox_disk": {
            mode: {step: [round(v, 4) for v in values] for step, values in steps.items()}
            for mode, steps in found.items()
        },
        "disk_watch_seconds": [round(v, 4) for v in watch],
        "session_store": {key: [round(v, 4) for v in values] for key, values in store.items()},
    }
    meta = {
        "command": "python -m bench.sandbox_disk"
        + (f" --samples {args.samples}" if args.samples != 20 else ""),
        "machine": machine(),
        "started_at": started_at.isoformat(timespec="seconds"),
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "wall_seconds": round(time.monotonic() - began),
        "metrics": ["disk"],
    }
    _, json_path, _ = save_results(args.results, rows, details, meta)
    print(json.dumps({k: {s: _median(v) for s, v in d.items()} for k, d in found.items()}))
    print(render_text(rows))
    print(f"wrote {json_path}")
    return 0 if all(row.passed for row in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
