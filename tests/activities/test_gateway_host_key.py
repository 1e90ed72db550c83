"""The host's gateway key, made by whichever worker of a home starts first: every worker gets
the same whole key, however close together they start (activities/gateway/tokens.py). Two
workers of a fresh home 9 ms apart once held different keys, so each gateway refused the
other's sandboxes (their git answered 404), and a reduced chaos run failed two runs at start."""

from __future__ import annotations

import multiprocessing
import multiprocessing.synchronize
from pathlib import Path

from activities.gateway.tokens import KEY_FILE, host_key

RACES = 60
WORKERS = 4


def _race(
    folder: str, start: multiprocessing.synchronize.Barrier, out: multiprocessing.Queue[bytes]
) -> None:
    start.wait()
    out.put(host_key(Path(folder)))


def test_workers_of_a_fresh_home_starting_together_get_one_whole_key(tmp_path: Path) -> None:
    context = multiprocessing.get_context("fork")
    for race in range(RACES):
        folder = tmp_path / f"home-{race}" / "gateway"
        start = context.Barrier(WORKERS)
        out: multiprocessing.Queue[bytes] = context.Queue()
        workers = [
            context.Process(target=_race, args=(str(folder), start, out)) for _ in range(WORKERS)
        ]
        for worker in workers:
            worker.start()
        keys = [out.get(timeout=30) for _ in workers]
        for worker in workers:
            worker.join(timeout=30)
        written = (folder / KEY_FILE).read_bytes()
        assert [len(key) for key in keys] == [32] * WORKERS, race
        assert set(keys) == {written}, race
    assert (folder / KEY_FILE).stat().st_mode & 0o777 == 0o600
    assert [p.name for p in folder.iterdir()] == [KEY_FILE]  # no temporary file left
