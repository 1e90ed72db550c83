"""What redacting a secret's other spellings costs: `python -m bench.redaction`.

Every checkpoint a run copies is redacted in the worker before it enters history
(activities/sandbox_base/checkpoints.py), the largest one a run accepts being 256 KiB. Measured here
on such a checkpoint (prose notes and a base64 blob, three secrets), in the same run: the baseline
looks for each secret as written only (the naive rule, and overnight's before base64, hex and
percent-encoded spellings), overnight for every spelling (overnight.core.output_tail.redact); and
the whole checkpoint read (`checkpoint_from`: redaction, the JSON's escapes, the facts).
Best of `repeats`, in milliseconds.
"""

from __future__ import annotations

import argparse
import base64
import json
import random
import re
import time
from collections.abc import Callable

from activities.providers.protocol import FileRead
from activities.sandbox_base.checkpoints import checkpoint_from
from bench.report import Row, render_text
from overnight.core.output_tail import REDACTED, redact, with_json_forms

CHECKPOINT_BYTES = 256 * 1024
SECRETS = ("sk-live-0123456789abcdefABCDEF", "ghp_" + "x1Y2z3" * 6, "p@ss w/ord+é&1234")
# The spellings may cost at most this much more than the value as written alone.
RATIO_AT_MOST = 2.0


def checkpoint(size: int = CHECKPOINT_BYTES, seed: int = 7) -> str:
    """A checkpoint of `size` bytes: notes in prose and a base64 blob (an attachment)."""
    rng = random.Random(seed)
    words = "the agent ran tests fixed a bug in the parser and pushed its branch".split()
    blob = base64.b64encode(rng.randbytes(size // 4)).decode()
    notes: list[str] = []
    text = ""
    while len(text.encode()) < size:
        notes += [" ".join(rng.choice(words) for _ in range(20)) for _ in range(50)]
        text = json.dumps({"step": 42, "next": "open the PR", "notes": notes, "blob": blob})
    return text


def as_written(text: str, secrets: tuple[str, ...]) -> str:
    """The baseline: each secret as written, longest first."""
    pattern = re.compile("|".join(re.escape(s) for s in sorted(secrets, key=len, reverse=True)))
    return pattern.sub(REDACTED, text)


def best_ms(work: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return min(times) * 1000


def rows(repeats: int = 15, size: int = CHECKPOINT_BYTES) -> list[Row]:
    text = checkpoint(size)
    forms = tuple(with_json_forms(SECRETS))
    read = FileRead(status="ok", data=text.encode())
    redact(text, forms)  # its expression compiled once, as in a worker
    return [
        Row(
            f"redact a {size // 1024} KiB checkpoint: every spelling vs as written",
            "ms",
            best_ms(lambda: as_written(text, forms), repeats),
            best_ms(lambda: redact(text, forms), repeats),
            target=f"ratio <= {RATIO_AT_MOST}",
            ratio_at_most=RATIO_AT_MOST,
            group="redaction",
        ),
        Row(
            f"read a {size // 1024} KiB checkpoint (checkpoint_from), 3 secrets",
            "ms",
            None,
            best_ms(lambda: checkpoint_from(read, None, SECRETS), repeats),
            note="context: redaction, the JSON's escapes and the facts",
            group="redaction",
        ),
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.redaction")
    parser.add_argument("--quick", action="store_true", help="a small checkpoint, 2 repeats")
    args = parser.parse_args(argv)
    found = rows(2, 16 * 1024) if args.quick else rows()
    print(render_text(found))


if __name__ == "__main__":
    main()
