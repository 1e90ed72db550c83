"""The worker's log says an activity's deliberate failure in one line, not a traceback.

The SDK logs every failed activity attempt with its traceback (`Completing activity as failed`,
`exc_info`): a clone retried 16 times wrote 16 tracebacks of 30 lines, the reason buried in
them. An `ApplicationError` is overnight saying what went wrong on purpose (a provider's
failure, a refused spec, a clone that failed): its type and first line are the whole story.
Anything else (a bug) keeps its traceback.
"""

from __future__ import annotations

import logging

from temporalio.exceptions import ApplicationError

# The SDK's activity logger, and the mark it puts on a failed attempt's record.
ACTIVITY_LOGGER = "temporalio.activity"
FAILURE_MARK = "__temporal_error_identifier"


class OneLineFailures(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if getattr(record, FAILURE_MARK, None) == "ActivityFailure" and isinstance(
            error, ApplicationError
        ):
            first = (error.message or "").strip().splitlines()
            record.msg = f"{record.getMessage()}: {error.type}: {first[0] if first else ''}"
            record.args = None
            record.exc_info = None
            record.exc_text = None
        return True


def install() -> None:
    """Once per process (a second call adds nothing)."""
    logger = logging.getLogger(ACTIVITY_LOGGER)
    if not any(isinstance(f, OneLineFailures) for f in logger.filters):
        logger.addFilter(OneLineFailures())
