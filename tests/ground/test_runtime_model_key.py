"""Which runs keep their model key out of their Runtime sandboxes as an egress secret, bound
to which hosts (overnight/core/runtime_model_key.py): the gateway's specs, on Runtime, whose model
API Runtime's proxy reaches over HTTPS."""

from __future__ import annotations

from typing import Any

from overnight.core.agent_kinds import ANY_API_HOST
from overnight.core.models import RunSpec
from overnight.core.runtime_model_key import held_by_runtime, keyed_command, runtime_key_plan


def spec(**fields: Any) -> RunSpec:
    base: dict[str, Any] = {
        "run_id": "run-1",
        "repo": "https://github.com/acme/app",
        "provider": "runtime",
        "agent": {"kind": "claude-code", "prompt": "Fix it"},
        "secret_env": ["ANTHROPIC_API_KEY", "NPM_TOKEN"],
    }
    return RunSpec.model_validate(base | fields)


def agent(kind: str, base_url: str = "") -> dict[str, str]:
    return {"kind": kind, "prompt": "Fix it", "base_url": base_url}


def test_the_gateways_specs_on_runtime_hold_their_key_as_a_secret_of_the_run() -> None:
    claude = runtime_key_plan(spec())
    assert claude is not None
    assert (claude.secret_name, claude.hosts) == (
        "OVERNIGHT_MODEL_KEY_RUN_1",
        ("api.anthropic.com",),
    )
    assert (claude.credential_env, claude.key_env) == ("ANTHROPIC_API_KEY", "ANTHROPIC_API_KEY")
    assert held_by_runtime(spec()) == {"ANTHROPIC_API_KEY"}  # NPM_TOKEN is copied in, as ever
    gateway = runtime_key_plan(
        spec(agent=agent("codex", "https://LLM.corp.example/v1"), model_credential="TEAM_KEY")
    )
    assert gateway is not None
    assert (gateway.credential_env, gateway.key_env) == ("TEAM_KEY", "OPENAI_API_KEY")
    assert gateway.hosts == ("llm.corp.example",)
    own = runtime_key_plan(spec(agent=None, agent_dir="/a", command="x", model_credential="K"))
    assert own is not None
    # An agent of one's own may call every kind's model API.
    assert (own.key_env, own.hosts) == ("OVERNIGHT_MODEL_TOKEN", ANY_API_HOST)
    assert {"api.anthropic.com", "api.openai.com"} <= set(own.hosts)
    assert keyed_command(claude, "run") == (
        'export ANTHROPIC_API_KEY="${OVERNIGHT_MODEL_KEY_RUN_1-}"\nrun'
    )


def test_keys_runtimes_proxy_cannot_put_in_stay_as_they_were() -> None:
    assert runtime_key_plan(spec(provider="local")) is None  # the local gateway's
    assert runtime_key_plan(spec(secret_env=["NPM_TOKEN"])) is None  # no key named
    # Plain HTTP never carries a secret; NO_PROXY sends loopback and private addresses direct.
    for base_url in ("http://llm.corp.example", "https://127.0.0.1:8443", "https://10.0.0.7"):
        assert runtime_key_plan(spec(agent=agent("claude-code", base_url))) is None
    assert runtime_key_plan(spec(agent=agent("claude-code", "https://localhost:1"))) is None


def test_a_key_runtime_would_copy_in_is_refused_unless_the_spec_asks_for_it() -> None:
    """Plain HTTP, or an address Runtime's proxy does not carry: the key would be in the
    sandbox's environment. The worker's check at the run's start refuses the spec, naming the
    field and the fix, whatever its grants; `model_key_in_sandbox: true` copies it in as
    before."""
    from overnight.core.grants import refusals

    for field, fields in (
        ("agent.base_url", {"agent": agent("claude-code", "http://llm.corp.example:8080/pw")}),
        (
            "agent.base_url",
            {"agent": agent("codex", "https://10.0.0.7/v1"), "secret_env": ["OPENAI_API_KEY"]},
        ),
        (
            "model_base_url",
            {
                "agent": None,
                "agent_dir": "/a",
                "command": "x",
                "model_credential": "K",
                "model_base_url": "http://llm.corp.example",
            },
        ),
    ):
        said = refusals(spec(**fields), None, home="/home/w/.overnight")
        assert len(said) == 1, said
        assert said[0].startswith(f"field {field}: ")
        assert "model_key_in_sandbox: true" in said[0] and "https://" in said[0]
        assert "/pw" not in said[0]  # the scheme and host only
        asked = spec(**fields, model_key_in_sandbox=True)
        assert refusals(asked, None, home="/home/w/.overnight") == []
        assert runtime_key_plan(asked) is None  # copied in, as the spec says
    assert (
        "plain HTTP"
        in refusals(spec(agent=agent("claude-code", "http://llm.corp.example")), None, home="/h")[0]
    )
    # Nothing to refuse: HTTPS at a public name, no key named, or not on Runtime.
    for fine in (
        spec(agent=agent("claude-code", "https://llm.corp.example")),
        spec(agent=agent("claude-code", "http://llm.corp.example"), secret_env=["NPM_TOKEN"]),
        spec(agent=agent("claude-code", "http://127.0.0.1:9"), provider="local"),
    ):
        assert refusals(fine, None, home="/home/w/.overnight") == []
