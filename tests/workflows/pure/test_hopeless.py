"""What no retry fixes (workflows/pure/hopeless.py): a first sandbox refused for good, or an
agent whose command is not there, fails the run at once with one line saying what to fix; a run
that once worked, or begun before fail-fast, goes the old way."""

from __future__ import annotations

from typing import Any

import pytest

from overnight.core.errors import SPEC_UNUSABLE
from overnight.core.grants import SPEC_REFUSED
from overnight.core.models import LastWords, RestartRecord, RunSpec
from tests.workflows.pure.test_decide import T0, later, running, spec
from workflows.pure.hopeless import (
    AGAIN,
    HOPELESS_CREATE_TYPES,
    FailRun,
    after_create_failed,
    after_exit,
    failure_text,
)
from workflows.pure.state import SupervisorState


def first_try(**overrides: Any) -> SupervisorState:
    """A fail-fast run on its first sandbox, which has written nothing yet."""
    return running(fail_fast=True, **overrides)


# ---- a create refused for good ---------------------------------------------------------------


@pytest.mark.parametrize("error_type", sorted(HOPELESS_CREATE_TYPES))
def test_a_first_create_refused_for_good_fails_the_run_saying_what_to_fix(error_type: str) -> None:
    failed = after_create_failed(first_try(), error_type, "repo file:///x:\n  does not exist")
    assert failed is not None
    assert failed.reason == f"run pure cannot start: repo file:///x: does not exist; {AGAIN}"
    kept = error_type if error_type in (SPEC_REFUSED, "InvalidSpec") else SPEC_UNUSABLE
    assert failed.error_type == kept and not failed.with_output


@pytest.mark.parametrize("error_type", [None, "Unavailable", "RateLimited", "ProviderError"])
def test_a_create_failure_a_retry_may_fix_is_left_to_the_retries(error_type: str | None) -> None:
    assert after_create_failed(first_try(), error_type, "try again") is None


def test_a_refused_create_after_the_run_once_worked_is_left_to_a_person() -> None:
    once = RestartRecord(attempt=1, reason="agent crashed (exit 1)", at=T0)
    assert after_create_failed(first_try(attempt=2), SPEC_UNUSABLE, "gone") is None
    assert after_create_failed(first_try(restarts=[once]), SPEC_UNUSABLE, "gone") is None
    assert after_create_failed(running(), SPEC_UNUSABLE, "gone") is None  # begun before


# ---- a command that is not there -------------------------------------------------------------


def test_a_command_not_found_at_the_first_start_fails_the_run() -> None:
    failed = after_exit(first_try(), 127)
    assert failed == FailRun(
        "run pure: the agent's command was not found (exit 127 at its first start, before any "
        "checkpoint; field command: python3 /workspace/agent/main.py)",
        with_output=True,
    )
    cannot = after_exit(first_try(), 126)
    assert cannot is not None and "command cannot be executed (exit 126" in cannot.reason


def test_a_long_command_is_cut_and_a_coding_agent_is_named_as_such() -> None:
    long = spec().model_copy(update={"command": "run   " + "x" * 200})
    failed = after_exit(first_try(spec=long), 127)
    assert failed is not None
    assert failed.reason.endswith(f"field command: run {'x' * 116})")
    coding = RunSpec(run_id="pure", repo="file:///tmp/repo", agent={"kind": "codex", "prompt": "x"})
    failed = after_exit(first_try(spec=coding), 127)
    assert failed is not None and failed.reason.endswith("field command: the coding agent)")


@pytest.mark.parametrize("code", [None, 0, 1, 2, 75, 125, 128, 137])
def test_other_exits_are_not_a_missing_command(code: int | None) -> None:
    assert after_exit(first_try(), code) is None


def test_an_agent_that_ran_a_while_or_was_started_again_is_not_a_missing_command() -> None:
    assert after_exit(first_try(last_progress_at=later(minutes=3)), 127) is None
    assert after_exit(first_try(process_fresh_start=1), 127) is None
    assert after_exit(running(), 127) is None  # begun before fail-fast


# ---- the line the run fails with -------------------------------------------------------------


def words(tail: str) -> LastWords:
    return LastWords(attempt=1, reason="agent crashed (exit 127)", at=T0, tail=tail)


def test_the_failure_adds_the_agents_last_output_line_when_asked() -> None:
    failed = FailRun("run pure: not found", with_output=True)
    said = words("starting\n  sh: 1: mytool:   not found  \n\n")
    assert failure_text(first_try(last_words=said), failed) == (
        f"run pure: not found; it said: sh: 1: mytool: not found; {AGAIN}"
    )
    cut = failure_text(first_try(last_words=words("y" * 300)), failed)
    assert cut == f"run pure: not found; it said: {'y' * 200}; {AGAIN}"


def test_with_nothing_said_the_failure_is_its_reason_and_what_to_do() -> None:
    failed = FailRun("run pure: not found", with_output=True)
    assert failure_text(first_try(), failed) == f"run pure: not found; {AGAIN}"
    assert failure_text(first_try(last_words=words("")), failed) == f"run pure: not found; {AGAIN}"
    assert failure_text(first_try(last_words=words(" \n \n")), failed) == (
        f"run pure: not found; {AGAIN}"
    )


def test_a_failure_without_output_is_its_reason_alone() -> None:
    failed = FailRun(f"run pure cannot start: gone; {AGAIN}")
    assert failure_text(first_try(last_words=words("ignored")), failed) == failed.reason
