"""What an activity call ended with, read the same way by every step: a Temporal cancellation
raised again (it must end the run as cancelled, not pass for a provider's failure), any other
failure handed back (`outcome`) or logged and turned into None (`best_effort`)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, is_cancelled_exception

T = TypeVar("T")


async def outcome(call: Awaitable[T]) -> T | ActivityError:
    """The call's result, or the failure it ended with (a cancellation is raised)."""
    try:
        return await call
    except ActivityError as err:
        reraise_cancellation(err)
        return err


async def best_effort(call: Awaitable[T], what: str) -> T | None:
    """The call's result; None, logged as "could not `what`", when it failed."""
    ended = await outcome(call)
    if isinstance(ended, ActivityError):
        workflow.logger.warning("could not %s: %s", what, describe(ended))
        return None
    return ended


def reraise_cancellation(err: ActivityError) -> None:
    """A Temporal cancellation that lands mid-activity arrives as an ActivityError; it must
    still end the run as cancelled, not be mistaken for a provider failure."""
    if is_cancelled_exception(err):
        raise asyncio.CancelledError() from err


def error_type(err: ActivityError) -> str | None:
    """The `type` of the ApplicationError behind an activity failure, if there is one."""
    cause = err.cause
    return cause.type if isinstance(cause, ApplicationError) else None


def handed_over(err: ActivityError) -> bool:
    """The activity ended because its worker began a graceful shutdown (`WorkerShutdown`,
    activities.heartbeat): nothing is wrong with the sandbox."""
    return error_type(err) == "WorkerShutdown"


def describe(err: BaseException) -> str:
    """The innermost cause of an activity failure, for logs and restart reasons."""
    while err.__cause__ is not None:
        err = err.__cause__
    return str(err)
