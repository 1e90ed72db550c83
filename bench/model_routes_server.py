"""`python -m bench.model_routes_server HOME`: a gateway of HOME in a process of its own, for
bench/model_routes.py (so that its CPU is its own, and the benchmark's client and the fake
model API do not share its interpreter). Prints its port, serves until SIGTERM."""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path

from activities.gateway.service import Gateway


def main(argv: list[str]) -> int:
    gateway = Gateway(Path(argv[0]))
    stop = threading.Event()
    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, lambda *_: stop.set())
    print(gateway.start(), flush=True)
    stop.wait()
    gateway.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
