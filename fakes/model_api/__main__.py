"""`python -m fakes.model_api --script FILE [--port N] [--log FILE] [--honour-stream]`: serve
a script (`--honour-stream`: a request that does not ask for a stream gets the whole answer).

Prints one line with the URLs to point the CLIs at, then serves until interrupted
(SIGINT or SIGTERM). `--log` appends one JSON line per request."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

from fakes.model_api.script_file import load_script
from fakes.model_api.server import FakeModelApi


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fakes.model_api", description=__doc__)
    parser.add_argument("--script", type=Path, required=True, help="the script (JSON)")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: a free one)")
    parser.add_argument("--log", type=Path, help="append one JSON line per request here")
    parser.add_argument(
        "--honour-stream", action="store_true", help='whole answers unless "stream": true'
    )
    args = parser.parse_args(argv)
    try:
        script = load_script(args.script)
    except (OSError, ValueError, KeyError) as error:
        print(f"fakes.model_api: bad script {args.script}: {error}", file=sys.stderr)
        return 2
    stop = threading.Event()
    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, lambda *_: stop.set())
    with FakeModelApi(
        script, port=args.port, log_file=args.log, honour_stream=args.honour_stream
    ) as fake:
        print(
            f"fake model API on {fake.url}: ANTHROPIC_BASE_URL={fake.anthropic_base_url} "
            f"codex base_url={fake.openai_base_url} "
            f"GOOGLE_GEMINI_BASE_URL={fake.gemini_base_url} ({script.pending} answers scripted)",
            flush=True,
        )
        stop.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
