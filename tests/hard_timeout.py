"""A second timeout for every test, one that needs nothing from Python to fire.

pytest-timeout's thread method ends a test process from a Python thread, which has to take
the interpreter lock first. A process whose lock is held for good (native code that blocks
holding it, as the Temporal bridge did in sdk-python #1642) never ends that way, and its
run waits for it forever. faulthandler's watchdog is a C thread: some time after the test's
own timeout it prints every thread's stack to the terminal and ends the process, which xdist
then names as lost on that test (tests/xdist_scheduling.py).
"""

from __future__ import annotations

import faulthandler
import os
from collections.abc import Generator

import pytest

# After the test's own timeout: time for pytest-timeout to end the process first.
GRACE_SECONDS = 60.0
_terminal: list[int] = []


def remember_terminal() -> None:
    """Keeps a copy of stderr as it is at configure time (the terminal, or xdist's), before
    a test's output capture takes the descriptor over. From `pytest_configure`."""
    if not _terminal:
        _terminal.append(os.dup(2))


def timeout_of(item: pytest.Item) -> float:
    """The test's timeout as pytest-timeout reads it: its `timeout` mark, else the ini's."""
    mark = item.get_closest_marker("timeout")
    if mark is not None:
        value = mark.kwargs.get("timeout", mark.args[0] if mark.args else 0)
    else:
        value = item.config.getini("timeout")
    return float(value or 0)


def watch(item: pytest.Item) -> Generator[None, object, object]:
    """For a `pytest_runtest_protocol` wrapper: armed over the test's setup, call and
    teardown, cancelled after."""
    limit = timeout_of(item)
    if limit <= 0 or not _terminal:
        return (yield)
    faulthandler.dump_traceback_later(limit + GRACE_SECONDS, exit=True, file=_terminal[0])
    try:
        return (yield)
    finally:
        faulthandler.cancel_dump_traceback_later()
