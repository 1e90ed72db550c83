"""What failed in a pytest run, from its JUnit XML, in a few lines per test, printed last.

CI shows the start and the end of a run's output: a run that ends in an internal error (a
test process lost mid-test) never prints pytest's own short summary, and the failures'
tracebacks sit in the middle. This prints each failed or errored test with its phase and the
lines that say why, after everything else.

Usage: python scripts/failures.py REPORT.xml
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path

# At most this many tests, and this many lines of why for each: the end of the output stays
# readable when a whole test process failed.
MOST_TESTS = 40
WHY_LINES = 4
LINE_CHARS = 240


def why_lines(text: str) -> list[str]:
    """The traceback's `E   ` lines (the exception and its message), else its last lines."""
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    said = [line for line in lines if line.startswith("E ")]
    return [line[:LINE_CHARS] for line in (said or lines)[-WHY_LINES:]]


def failures(report: Path) -> list[list[str]]:
    """One block a failed or errored test: its kind, name and message, then its why lines."""
    blocks: list[list[str]] = []
    for case in ET.parse(report).getroot().iter("testcase"):
        for kind in ("failure", "error"):
            for found in case.findall(kind):
                name = f"{case.get('classname', '')}::{case.get('name', '')}"
                message = (found.get("message") or "").splitlines()
                head = f"{kind.upper()} {name}: {message[0][:LINE_CHARS] if message else ''}"
                blocks.append([head, *(f"    {line}" for line in why_lines(found.text or ""))])
    return blocks


def main(argv: list[str]) -> int:
    report = Path(argv[1])
    if not report.is_file():
        print(f"no test report at {report}: pytest ended before writing it", file=sys.stderr)
        return 0
    blocks = failures(report)
    if blocks:
        print("== what failed (from the test report)", file=sys.stderr)
        for block in blocks[:MOST_TESTS]:
            print("\n".join(block), file=sys.stderr)
        if len(blocks) > MOST_TESTS:
            print(f"... and {len(blocks) - MOST_TESTS} more", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
