"""Errors worth one line to a person. `bad_input` ones are the caller's to fix (CLI exit 2)."""

from __future__ import annotations

# The `ApplicationError.type` of what no retry fixes in a spec as it meets the world (a repo
# that does not exist or refuses, an `agent_dir` not on the worker, a command not found): the
# create fails at once, and a run on its first attempt fails with it (workflows.pure.hopeless).
SPEC_UNUSABLE = "SpecUnusable"


class OvernightError(Exception):
    bad_input = False


class SpecError(OvernightError):
    bad_input = True


class ServerUnreachable(OvernightError, RuntimeError):
    """No Temporal server answers at the address a client dialled (overnight.core.connect). A
    RuntimeError too, as the SDK's own error it replaces."""


class RunNotFound(OvernightError):
    """No workflow with this run id in the namespace."""

    def __init__(self, run_id: str) -> None:
        super().__init__(f"no run {run_id!r} in this namespace")


class RunAlreadyExists(OvernightError):
    """A run id names one run: a second start with it is refused."""

    bad_input = True


class AnswerRefused(OvernightError):
    """The run took no answer: no question waits, or the text is not one of its choices."""

    bad_input = True


class PushRefused(OvernightError):
    """The run waits on no push, pull request or CI look to try again."""

    bad_input = True


class RunNotRunning(OvernightError):
    """The run exists but has ended, so it takes no more signals."""
