"""The full forms of the tests the suite runs shortened: `OVERNIGHT_FULL_TESTS=1 bash
scripts/test` (or with `-k` for one) runs each at its full size. A shortened test measures the
same thing at a smaller size (the same ratios, the same bounds), never asserting less."""

from __future__ import annotations

import os

FULL = os.environ.get("OVERNIGHT_FULL_TESTS", "") == "1"


def sized(quick: int, full: int) -> int:
    return full if FULL else quick
