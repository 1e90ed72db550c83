"""The one boundary where provider failures become Temporal activity errors.

Providers raise `ProviderError` (activities/providers/protocol.py) with a `kind` and a `retryable`
flag; nothing else in overnight decides what is retryable. Every sandbox activity runs its
provider calls inside `activity_errors()`, which turns them into `ApplicationError`s whose
`type` is the kind: retryable ones are retried by the activity's retry policy, the others
(`non_retryable=True`: bad credentials, invalid request, payment or spending limit, sandbox
not found or not running) fail the activity at once so the workflow can decide.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from temporalio.exceptions import ApplicationError

from activities.providers.protocol import ProviderError
from overnight.core.errors import SPEC_UNUSABLE


class ErrorType:
    """`ApplicationError.type` values raised by the sandbox activities themselves.

    Provider kinds pass through as they are (`SandboxNotFound`, `SandboxNotRunning`,
    `InvalidRequest`, and whatever the runtime provider names, e.g. `AuthenticationFailed`).
    """

    MISSING_SECRET = "MissingSecret"
    MISSING_CREDENTIALS = "MissingCredentials"
    INVALID_REQUEST = "InvalidRequest"
    SETUP_FAILED = "SandboxSetupFailed"
    # What the spec asks cannot be had here and no retry changes it (overnight.core.errors).
    SPEC_UNUSABLE = SPEC_UNUSABLE
    # The attempt's sandbox already ended (e.g. its time limit passed while a create was being
    # retried); its name is taken for good, so the workflow must go on with the next attempt.
    SANDBOX_GONE = "SandboxGone"
    # The worker began a graceful shutdown: the step ended so another worker carries it on
    # (retryable, retried at once; activities.heartbeat).
    WORKER_SHUTDOWN = "WorkerShutdown"


def to_application_error(error: ProviderError) -> ApplicationError:
    """The activity error for a provider failure: same message, `type` = its kind."""
    return ApplicationError(str(error), type=error.kind, non_retryable=not error.retryable)


def non_retryable(error_type: str, message: str) -> ApplicationError:
    return ApplicationError(message, type=error_type, non_retryable=True)


@contextmanager
def activity_errors() -> Iterator[None]:
    """Translate `ProviderError`s raised inside the block; anything else passes unchanged."""
    try:
        yield
    except ProviderError as error:
        raise to_application_error(error) from error
