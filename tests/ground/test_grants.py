"""The worker's grants (overnight/core/grants.py): read from its settings, and the pure decision
over a spec. What is refused without a grant, what each refusal says (the field, and the setting
that would allow it), and what no grant allows (the worker's state directory)."""

from __future__ import annotations

from typing import Any

import pytest

from overnight.core.grants import (
    BadSetting,
    Grants,
    parse_grants,
    refusal_message,
    refusals,
)
from overnight.core.models import RunSpec

HOME = "/srv/overnight-home"


def spec(**fields: Any) -> RunSpec:
    base: dict[str, Any] = {
        "run_id": "r",
        "repo": "https://example.invalid/app.git",
        "agent_dir": "/srv/agents/a",
        "command": "c",
    }
    return RunSpec.model_validate({**base, **fields})


def refused(
    run: RunSpec, grants: Grants | None = None, real: dict[str, str] | None = None
) -> list[str]:
    return refusals(run, grants or Grants(), home=HOME, real=real)


def test_a_worker_with_no_settings_grants_nothing() -> None:
    assert parse_grants({}) == Grants()
    assert refused(spec()) == []  # a spec asking for nothing of the kind runs anywhere


def test_settings_are_read_into_grants() -> None:
    grants = parse_grants(
        {
            "OVERNIGHT_ALLOW_UNISOLATED": "1",
            "OVERNIGHT_SECRET_ENV": " GITHUB_TOKEN, ANTHROPIC_*,GITHUB_TOKEN ",
            "OVERNIGHT_BIND_ROOTS": "/data/:/models//x:",
            "OVERNIGHT_WRITABLE_BIND_ROOTS": "/srv/git",
        }
    )
    assert grants == Grants(
        allow_unisolated=True,
        secret_env=("GITHUB_TOKEN", "ANTHROPIC_*"),
        bind_roots=("/data", "/models/x"),
        writable_bind_roots=("/srv/git",),
    )
    assert parse_grants({"OVERNIGHT_ALLOW_UNISOLATED": "0"}).allow_unisolated is False


@pytest.mark.parametrize(
    ("setting", "value", "said"),
    [
        ("OVERNIGHT_ALLOW_UNISOLATED", "maybe", "say 1 to allow"),
        ("OVERNIGHT_SECRET_ENV", "*", "neither a variable name nor a NAME_* pattern"),
        ("OVERNIGHT_SECRET_ENV", "GIT*", "neither a variable name nor a NAME_* pattern"),
        ("OVERNIGHT_SECRET_ENV", "TEMPORAL_*", "list each of those by name"),
        ("OVERNIGHT_SECRET_ENV", "OVERNIGHT_*", "list each of those by name"),
        ("OVERNIGHT_SECRET_ENV", "GITHUB_TOKEN,OVERNIGHT_CODEC_KEYS", "never given to a sandbox"),
        ("OVERNIGHT_SECRET_ENV", "OVERNIGHT_CODEC_SERVER_TOKEN", "never given to a sandbox"),
        ("OVERNIGHT_BIND_ROOTS", "data", "not an absolute path"),
        ("OVERNIGHT_WRITABLE_BIND_ROOTS", "~/git", "not an absolute path"),
    ],
)
def test_a_setting_that_cannot_be_read_stops_the_worker(
    setting: str, value: str, said: str
) -> None:
    with pytest.raises(BadSetting) as bad:
        parse_grants({setting: value})
    assert str(bad.value).startswith(f"{setting}") and said in str(bad.value)


def test_isolation_none_needs_the_grant() -> None:
    [refusal] = refused(spec(isolation="none"))
    assert refusal.startswith('field isolation: "none"')
    assert "start the worker with OVERNIGHT_ALLOW_UNISOLATED=1 to allow it" in refusal
    assert refused(spec(isolation="none"), Grants(allow_unisolated=True)) == []


def test_a_secret_is_copied_only_when_the_worker_lists_it() -> None:
    run = spec(secret_env=["RUNTIME_API_KEY"])
    assert refused(run) == [
        "field secret_env: RUNTIME_API_KEY is not in this worker's allow-list (start the "
        "worker with OVERNIGHT_SECRET_ENV=RUNTIME_API_KEY to allow it)"
    ]
    assert refused(run, Grants(secret_env=("RUNTIME_API_KEY",))) == []
    assert refusal_message(refused(run)).startswith("spec: field secret_env: RUNTIME_API_KEY")


def test_a_pattern_allows_the_names_it_begins_but_never_the_workers_own() -> None:
    grants = Grants(secret_env=("GITHUB_*", "TEMPORAL_API_KEY"))
    assert refused(spec(secret_env=["GITHUB_TOKEN", "TEMPORAL_API_KEY"]), grants) == []
    # Several names refused: one refusal names them all.
    some = Grants(secret_env=("R_*",))
    [refusal] = refused(spec(secret_env=["R_TOKEN", "RUNTIME_API_KEY", "OTHER"]), some)
    assert refusal.startswith("field secret_env: RUNTIME_API_KEY, OTHER are not in")
    assert "OVERNIGHT_SECRET_ENV=RUNTIME_API_KEY,OTHER to allow them" in refusal
    everything = Grants(secret_env=("O_*", "T_*"))
    for own in ("OVERNIGHT_NOTIFY_SECRET", "OVERNIGHT_CODEC_KEYS", "TEMPORAL_TLS_KEY"):
        assert everything.allows_secret(own) is False
        assert Grants(secret_env=(own,)).allows_secret(own) is True
    # A pattern that would have matched but for the rule says so.
    [noted] = refused(spec(secret_env=["RUNTIME_API_KEY"]), Grants(secret_env=("RUN_*",)))
    assert "RUNTIME_API_KEY" in noted and "a pattern never matches" not in noted
    [noted] = refused(spec(secret_env=["RUNTIME_KEY_X"]), Grants(secret_env=("RUNTIME_KEY_*",)))
    assert "a pattern never matches a name beginning TEMPORAL_, RUNTIME_, OVERNIGHT_" in noted


def test_a_webhook_signs_only_with_a_secret_the_worker_allows() -> None:
    hooks = [
        {"url": "https://hooks.example/a"},
        {"url": "https://hooks.example/b", "secret_env": "OVERNIGHT_NOTIFY_SECRET"},
        {"url": "https://hooks.example/c", "secret_env": "RUNTIME_API_KEY"},
    ]
    assert refused(spec(notify=hooks)) == [
        "field notify.2.secret_env: RUNTIME_API_KEY is not in this worker's allow-list (start "
        "the worker with OVERNIGHT_SECRET_ENV=RUNTIME_API_KEY to allow it)"
    ]
    assert refused(spec(notify=hooks), Grants(secret_env=("RUNTIME_API_KEY",))) == []


def test_a_bind_needs_a_root_that_holds_it() -> None:
    data = [{"path": "/data/set"}]
    [refusal] = refused(spec(binds=data))
    assert refusal == (
        "field binds: /data/set is not inside a folder this worker allows binds from (start "
        "the worker with OVERNIGHT_BIND_ROOTS=/data/set, or a folder holding it, to allow it)"
    )
    assert refused(spec(binds=data), Grants(bind_roots=("/data",))) == []
    assert refused(spec(binds=data), Grants(bind_roots=("/data/set",))) == []
    assert refused(spec(binds=data), Grants(bind_roots=("/dat",))) != []  # a name, not a prefix
    # A writable root holds read-only binds too.
    assert refused(spec(binds=data), Grants(writable_bind_roots=("/data",))) == []


def test_a_writable_bind_needs_a_writable_root() -> None:
    shared = [{"path": "/data/shared", "writable": True}]
    [refusal] = refused(spec(binds=shared), Grants(bind_roots=("/data",)))
    assert refusal.startswith("field binds: /data/shared (writable) is not inside a folder")
    assert "allows writable binds from" in refusal
    assert "OVERNIGHT_WRITABLE_BIND_ROOTS=/data/shared" in refusal
    assert refused(spec(binds=shared), Grants(writable_bind_roots=("/data",))) == []


def test_a_bind_is_judged_where_it_really_leads() -> None:
    grants = Grants(bind_roots=("/data",))
    link = [{"path": "/data/link"}]
    [refusal] = refused(spec(binds=link), grants, real={"/data/link": "/etc/ssh"})
    assert refusal.startswith("field binds: /data/link (really /etc/ssh) is not wholly inside")
    assert "OVERNIGHT_BIND_ROOTS=/etc/ssh" in refusal
    # A root that is itself a link holds what is under its target.
    real = {"/data": "/mnt/disk/data", "/data/x": "/mnt/disk/data/x"}
    assert refused(spec(binds=[{"path": "/data/x"}]), grants, real=real) == []


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"binds": [{"path": f"{HOME}/sandboxes/other-run"}]}, "binds"),
        ({"binds": [{"path": f"{HOME}/temporal", "writable": True}]}, "binds"),
        ({"binds": [{"path": "/srv"}]}, "binds"),  # holds the state directory
        ({"repo": f"{HOME}/sandboxes/other-run/workspace/app"}, "repo"),
        ({"repo": f"file://{HOME}/sandboxes/x"}, "repo"),
        ({"repo": "file:///srv/overnight%2Dhome/sandboxes/x"}, "repo"),
        ({"agent_dir": f"{HOME}/sandboxes/other-run/workspace"}, "agent_dir"),
    ],
)
def test_the_workers_state_directory_is_never_granted(fields: dict[str, Any], field: str) -> None:
    everything = Grants(allow_unisolated=True, bind_roots=("/",), writable_bind_roots=("/",))
    [refusal] = refused(spec(**fields), everything)
    assert refusal.startswith(f"field {field}: ")
    assert "the worker's state directory (OVERNIGHT_HOME" in refusal
    assert "which no sandbox may see" in refusal


def test_the_state_directory_is_found_through_links() -> None:
    real = {"/srv/innocent": f"{HOME}/temporal", "/opt/agent": f"{HOME}/sandboxes/r-1"}
    run = spec(binds=[{"path": "/srv/innocent"}], agent_dir="/opt/agent")
    found = refused(run, Grants(bind_roots=("/",)), real=real)
    assert [f.split(":")[0] for f in found] == ["field agent_dir", "field binds"]
    assert f"/srv/innocent (really {HOME}/temporal) is inside" in found[1]
    # The state directory itself behind a link: its real path counts too.
    real = {HOME: "/var/lib/overnight", "/data/x": "/var/lib/overnight/db"}
    assert refused(spec(binds=[{"path": "/data/x"}]), Grants(bind_roots=("/",)), real=real)


def test_every_refusal_of_a_spec_is_said_in_one_line() -> None:
    run = spec(isolation="none", secret_env=["AWS_SECRET_ACCESS_KEY"], binds=[{"path": "/data"}])
    message = refusal_message(refused(run))
    assert len(message.splitlines()) == 1
    assert [part.split(":")[0] for part in message.removeprefix("spec: ").split("; ")] == [
        "field isolation",
        "field secret_env",
        "field binds",
    ]


def test_without_the_grants_only_what_no_grant_allows_is_said() -> None:
    # What a CLI can tell, not knowing the worker's settings.
    run = spec(
        isolation="none",
        secret_env=["RUNTIME_API_KEY"],
        binds=[{"path": "/data"}, {"path": f"{HOME}/temporal"}],
    )
    [refusal] = refusals(run, None, home=HOME)
    assert refusal.startswith(f"field binds: {HOME}/temporal is inside the worker's state")


def test_host_ports_may_never_name_the_workers_own_temporal_server() -> None:
    spec = RunSpec.model_validate({**_SPEC_FOR_PORTS, "host_ports": [7233, 8080]})
    found = refusals(spec, Grants(), home="/srv/overnight", protected_ports={7233, 8233})
    assert found == [
        "field host_ports: 7233 is the port of the Temporal server this worker talks to (or "
        "its Web UI), which no sandbox may reach; serve what the agent needs on another port"
    ]
    assert refusals(spec, Grants(), home="/srv/overnight", protected_ports=set()) == []


_SPEC_FOR_PORTS = {
    "run_id": "ports",
    "repo": "https://example.invalid/x.git",
    "agent_dir": "/srv/agents/a",
    "command": "true",
}
