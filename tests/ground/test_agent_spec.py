"""`RunSpec.agent` (a coding agent: Claude Code or Codex): what it accepts, what it refuses and
how the one line names the fields, as the CLI and the workflow's intake say it."""

from __future__ import annotations

from typing import Any

import pytest

from overnight.core.agent_kinds import AGENT_CLIS
from overnight.core.agent_spec import MAX_PROMPT_CHARS
from overnight.core.errors import SpecError
from overnight.core.intake import InvalidInput, accept_spec
from overnight.core.models import RunSpec
from overnight.core.specs import parse_spec

AGENT = {"kind": "claude-code", "prompt": "Make tests/test_api.py pass"}


def raw(**changes: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {"run_id": "fix-flaky", "repo": "https://example.com/app.git"}
    fields["agent"] = dict(AGENT)
    fields.update(changes)
    return {k: v for k, v in fields.items() if v is not None}


def refusal(fields: dict[str, Any]) -> str:
    with pytest.raises(SpecError) as caught:
        parse_spec(fields)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_the_issues_example_is_a_spec() -> None:
    spec = parse_spec(
        {
            "run_id": "fix-flaky",
            "repo": "https://example.com/app.git",
            "agent": {
                "kind": "claude-code",
                "prompt": "Make tests/test_api.py pass",
                "model": "",
                "max_turns": 0,
                "base_url": "",
            },
            "secret_env": ["ANTHROPIC_API_KEY"],
        }
    )
    assert spec.agent is not None and spec.agent.kind == "claude-code"
    assert (spec.agent_dir, spec.command) == ("", "")
    assert spec.branch == "agent/fix-flaky"


def test_defaults_and_every_field() -> None:
    spec = parse_spec(raw(agent={"kind": "codex", "prompt": "x"}))
    assert spec.agent is not None
    assert (spec.agent.model, spec.agent.max_turns, spec.agent.base_url) == ("", 0, "")
    full = {
        "kind": "codex",
        "prompt": "p" * MAX_PROMPT_CHARS,
        "model": "gpt-5.5-codex",
        "max_turns": 40,
        "base_url": "http://127.0.0.1:8123/v1",
    }
    assert parse_spec(raw(agent=full)).agent.model_dump() == full  # type: ignore[union-attr]


def test_an_old_spec_stays_valid() -> None:
    spec = parse_spec(
        {"repo": "/srv/app.git", "agent_dir": "/srv/agent", "command": "python3 main.py"}
    )
    assert spec.agent is None and spec.command == "python3 main.py"


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"agent_dir": "/srv/agent"}, "field agent: agent_dir must be left out"),
        ({"command": "python3 x.py"}, "field agent: command must be left out"),
        (
            {"agent_dir": "/srv/agent", "command": "python3 x.py"},
            "field agent: agent_dir and command must be left out",
        ),
        ({"agent": None}, "field agent: a spec needs agent"),
        ({"agent": None, "agent_dir": "/srv/agent"}, "field command: required with agent_dir"),
        ({"agent": None, "command": "python3 x.py"}, "field agent_dir: required with command"),
    ],
)
def test_both_ways_or_neither_is_refused_naming_the_fields(
    changes: dict[str, Any], named: str
) -> None:
    fields = raw(**changes)
    if "agent" in changes and changes["agent"] is None:
        fields.pop("agent", None)
    message = refusal(fields)
    assert named in message, message
    if "neither" in message:
        assert "agent_dir" in message and "command" in message


@pytest.mark.parametrize(
    ("agent", "field", "words"),
    [
        ({"kind": "aider", "prompt": "x"}, "agent.kind", f"or {list(AGENT_CLIS)[-1]!r}"),
        ({"prompt": "x"}, "agent.kind", "required"),
        ({"kind": "codex"}, "agent.prompt", "required"),
        ({"kind": "codex", "prompt": ""}, "agent.prompt", "at least 1"),
        ({"kind": "codex", "prompt": "   \n"}, "agent.prompt", "blank"),
        (
            {"kind": "codex", "prompt": "p" * (MAX_PROMPT_CHARS + 1)},
            "agent.prompt",
            "at most 100000",
        ),
        ({"kind": "codex", "prompt": "a\x00b"}, "agent.prompt", "NUL"),
        ({"kind": "codex", "prompt": "x", "max_turns": -1}, "agent.max_turns", "greater"),
        ({"kind": "codex", "prompt": "x", "max_turns": 10**6}, "agent.max_turns", "less"),
        ({"kind": "codex", "prompt": "x", "max_turns": "5"}, "agent.max_turns", "integer"),
        ({"kind": "codex", "prompt": "x", "model": "gpt 5"}, "agent.model", "not a model"),
        ({"kind": "codex", "prompt": "x", "base_url": "ftp://h/x"}, "agent.base_url", "http"),
        ({"kind": "codex", "prompt": "x", "base_url": "127.0.0.1:80"}, "agent.base_url", "http"),
        ({"kind": "codex", "prompt": "x", "base_url": "http://"}, "agent.base_url", "host"),
        ({"kind": "codex", "prompt": "x", "base_url": "http://h:99999"}, "agent.base_url", "URL"),
        (
            {"kind": "codex", "prompt": "x", "base_url": "https://u:key@gw.example/v1"},
            "agent.base_url",
            "secret_env",
        ),
        ({"kind": "codex", "prompt": "x", "base_url": "http://h/ x"}, "agent.base_url", "spaces"),
        ({"kind": "codex", "prompt": "x", "api_key": "sk-1"}, "agent.api_key", "unknown field"),
    ],
)
def test_a_bad_agent_is_refused_naming_its_field(
    agent: dict[str, Any], field: str, words: str
) -> None:
    message = refusal(raw(agent=agent))
    assert message.startswith(f"spec: field {field}:"), message
    assert words in message, message


def test_good_base_urls() -> None:
    for url in ("https://gateway.example/anthropic", "http://127.0.0.1:8123", "http://[::1]:9/v1"):
        assert parse_spec(raw(agent={**AGENT, "base_url": url})).agent.base_url == url  # type: ignore[union-attr]


def test_the_workflow_refuses_the_same_way() -> None:
    with pytest.raises(InvalidInput) as caught:
        accept_spec(raw(command="python3 x.py"), "fix-flaky")
    assert "field agent: command must be left out" in str(caught.value)
    accepted = accept_spec(raw(), "fix-flaky")
    assert isinstance(accepted, RunSpec) and accepted.agent is not None


def test_a_coding_agent_keeps_the_default_exit_codes() -> None:
    message = refusal(raw(fresh_context_exit_code=76))
    assert message.startswith("spec: field fresh_context_exit_code: a coding agent's adapter")
    assert parse_spec(raw(fresh_context_exit_code=75)).fresh_context_exit_code == 75
