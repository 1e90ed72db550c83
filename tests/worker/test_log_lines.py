"""The worker logs an activity's deliberate failure in one line (overnight/worker/log_lines.py);
a bug keeps its traceback."""

from __future__ import annotations

import logging
import sys

from temporalio.exceptions import ApplicationError

from overnight.worker.log_lines import FAILURE_MARK, OneLineFailures


def _record(error: BaseException) -> logging.LogRecord:
    try:
        raise error
    except BaseException:
        info = sys.exc_info()
    return logging.LogRecord(
        "temporalio.activity",
        logging.WARNING,
        __file__,
        1,
        "Completing activity as failed (%s)",
        ("{'activity_type': 'create_sandbox'}",),
        info,
    )


def test_an_application_error_is_one_line_and_a_bug_keeps_its_traceback() -> None:
    failed = _record(
        ApplicationError("cloning x: connection refused\nmore", type="SandboxSetupFailed")
    )
    setattr(failed, FAILURE_MARK, "ActivityFailure")
    assert OneLineFailures().filter(failed)
    text = logging.Formatter().format(failed)
    assert text == (
        "Completing activity as failed ({'activity_type': 'create_sandbox'}): "
        "SandboxSetupFailed: cloning x: connection refused"
    )
    bug = _record(KeyError("oops"))
    setattr(bug, FAILURE_MARK, "ActivityFailure")
    assert OneLineFailures().filter(bug)
    assert "Traceback" in logging.Formatter().format(bug)
