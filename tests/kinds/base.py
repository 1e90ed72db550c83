"""What the tests know of one coding-agent kind (`KindFacts`): each kind's module in this
package defines its `FACTS` and its `Driver` (tests/agent_clis/clis.py runs it headless), so
the tests that run every kind (tests/agent_clis, tests/e2e/coding_agent_runs.py) name none.

These are the tests' own witnesses, written from the CLIs' behaviour: never read from
`overnight.core.agent_kinds.AGENT_CLIS`, whose rows they check."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from fakes.model_api import FakeModelApi, RecordedRequest
from tests.agent_clis.clis import Driver


@dataclass(frozen=True)
class KindFacts:
    kind: str  # as in `RunSpec.agent.kind` and `AGENT_CLIS`
    # Its way of being run headless in tests/agent_clis (command lines, settings, output).
    driver: type[Driver]
    credential_env: str  # the variable its API key is read from
    binary: str  # its executable's name, as the process shows it (/proc/<pid>/exe)
    session_files: str  # a glob of its session files, under the sandbox's $HOME
    base_url: Callable[[FakeModelApi], str]  # the fake's base URL for it (`agent.base_url`)
    # The name of its shell tool, as the adapter's notes and loop name it.
    shell_tool: str
    # Its step label of an MCP tool ({server}, {tool}).
    mcp_step_label: str
    # What the resumed CLI sends for the tool call its kill interrupted.
    interrupted: str
    # Whether a transcript's text holds the result of a call id.
    tool_result_stored: Callable[[str], re.Pattern[str]]
    # Whether it reports its own dollars (else its tokens are priced by the table).
    reports_own_usd: bool
    # Whether its own retries of a failing model API (529s, a closed port) end in seconds
    # under the adapter's settings; else the tests of waiting them out skip it.
    retries_quickly: bool
    # Whether its tool's shell outlives a SIGKILL of the CLI (the adapter ends it then).
    tool_outlives_cli: bool
    # Whether it stops at `max_turns` itself (else the adapter stops it, and a call it was
    # quick to start meanwhile may complete).
    stops_at_max_turns: bool
    # Whether it offers MCP tools only through its tool search.
    mcp_through_tool_search: bool
    # Whether its session file records a call while it runs (else only once it ended: a
    # call its kill interrupted is not in the resumed session).
    records_running_calls: bool = True
    # Whether a session whose first model call failed can be resumed (else the adapter
    # seeds a new session: its file is written only once an answer came).
    keeps_unanswered_session: bool = True
    # Variables the adapter tests add to its environment.
    adapter_env: tuple[tuple[str, str], ...] = ()
    # What the adapter's environment changes for it to say when a usage limit resets
    # (None: the variable unset).
    usage_limit_env: tuple[tuple[str, str | None], ...] = ()
    # The variable its subscription's sign-in is read from ("": none).
    subscription_env: str = ""
    # The start of its default model's name, priced in the adapter tests' table (at $1 in and
    # $10 out a million tokens: tests/agent_clis/adapter.py) when it reports no dollars.
    priced_model: str = ""

    def call_in_session(self, mentions: Callable[[str], bool], call_id: str) -> bool:
        """Whether a running call is as recorded as it will be while it runs: in the session
        file (`mentions`), or, for a kind that records a call only when it ends, at once."""
        return not self.records_running_calls or mentions(call_id)

    def resumed_after_kill(
        self, request: RecordedRequest, done_call: str, killed_call: str, *, said: bool = False
    ) -> None:
        """That the resumed session's first request carries the result of the call done
        before the kill, each once and in order, and what its kind records of the killed call:
        said to be `interrupted` (checked when `said`), or, where a call is recorded only when
        it ends, nothing."""
        results = request.tool_results()
        called = [r.call_id for r in results]
        if not self.records_running_calls:
            assert done_call in called and killed_call not in called, called
            return
        assert called == [done_call, killed_call]
        if said:
            assert not results[0].is_error and self.interrupted not in results[0].output
            assert self.interrupted in results[1].output

    def mcp_step(self, server: str, tool: str) -> str:
        return self.mcp_step_label.format(server=server, tool=tool)
