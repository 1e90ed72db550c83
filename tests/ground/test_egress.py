"""The rules of a sandbox's network (overnight/core/egress.py, the egress part of
overnight/core/grants.py): which patterns a spec may write, which names they allow, what a worker
grants, and what a spec is refused at start for asking more."""

from __future__ import annotations

import ipaddress

import pytest
from pydantic import ValidationError

from overnight.core.agent_spec import CodingAgent
from overnight.core.egress import (
    DEFAULT_GRANTED,
    EgressError,
    allows,
    check_pattern,
    covers,
    host_of,
    implied,
    normal_host,
    parse_address_rules,
    parse_granted,
    refusal_words,
    worker_allows,
)
from overnight.core.grants import BadSetting, Grants, allowed_names, parse_grants, refusals
from overnight.core.models import RunSpec


def spec(**fields: object) -> RunSpec:
    base: dict[str, object] = {
        "run_id": "net-1",
        "repo": "https://github.com/acme/app.git",
        "agent_dir": "/srv/agent",
        "command": "python3 main.py",
    }
    return RunSpec.model_validate(base | fields)


def test_patterns_are_kept_in_normal_form() -> None:
    assert check_pattern(" GitHub.COM. ") == "github.com"
    assert check_pattern("*.PyPI.org") == "*.pypi.org"
    assert check_pattern("bücher.example") == "xn--bcher-kva.example"
    assert check_pattern("[2606:4700::1]") == "2606:4700::1"
    # Any spelling of an address is the address it spells.
    assert check_pattern("0x7f.1") == "127.0.0.1"


@pytest.mark.parametrize(
    "bad", ["*", "*.org", "*.1.2.3.4", "exa mple.com", "-x.com", "a..b", "x" * 64 + ".com", ""]
)
def test_a_pattern_that_is_no_host_is_refused(bad: str) -> None:
    with pytest.raises(EgressError):
        check_pattern(bad)


def test_a_wildcard_allows_the_names_below_it_and_not_the_name_itself() -> None:
    assert allows(["*.pypi.org"], "files.pypi.org")
    assert allows(["*.pypi.org"], "a.b.pypi.org")
    assert not allows(["*.pypi.org"], "pypi.org")
    assert not allows(["*.pypi.org"], "evilpypi.org")
    assert allows(["github.com"], "github.com")
    assert not allows(["github.com"], "api.github.com")
    assert allows(["*"], "anything.example")


def test_a_grant_covers_only_what_it_allows_whole() -> None:
    assert covers("*.example.com", "*.api.example.com")
    assert covers("*.example.com", "a.example.com")
    assert not covers("*.example.com", "example.com")
    assert not covers("a.example.com", "*.example.com")
    assert covers("*", "*.anything.org")


def test_the_hosts_a_run_reaches_without_listing_them() -> None:
    assert host_of("git@github.com:acme/app.git") == "github.com"
    assert host_of("https://GitLab.example:8443/x.git") == "gitlab.example"
    assert host_of("/srv/git/app") is None and host_of("file:///srv/git/app") is None
    assert implied("https://github.com/a/b", "claude-code", None) == [
        "github.com",
        "api.anthropic.com",
    ]
    assert implied("/srv/app", "codex", "https://llm.corp.example/v1") == ["llm.corp.example"]
    assert implied("/srv/app", None, None) == []


def test_a_spec_with_no_egress_gets_the_workers_default_list() -> None:
    names = allowed_names(spec(), Grants())
    assert names == (*DEFAULT_GRANTED, "github.com")
    assert allowed_names(spec(egress=["example.org"]), Grants()) == ("example.org", "github.com")
    assert allowed_names(spec(network="open"), Grants()) == ("*",)
    # A worker granting every name does not make every run open.
    assert "*" not in allowed_names(spec(), Grants(egress=("*",)))


def test_a_spec_asking_more_than_the_worker_grants_is_refused_with_the_names() -> None:
    found = refusals(spec(egress=["evil.example", "pypi.org"]), Grants(), home="/var/overnight")
    assert len(found) == 1
    assert "field egress: evil.example not granted" in found[0]
    assert "OVERNIGHT_EGRESS_ALLOW=" in found[0] and "evil.example" in found[0]
    assert refusals(spec(egress=["pypi.org", "github.com"]), Grants(), home="/x") == []


def test_an_open_network_needs_the_workers_grant() -> None:
    refused = refusals(spec(network="open"), Grants(), home="/x")
    assert refused and "OVERNIGHT_ALLOW_OPEN_NETWORK=1" in refused[0]
    assert refusals(spec(network="open"), Grants(allow_open_network=True), home="/x") == []


def test_a_bad_pattern_is_refused_when_the_spec_is_read() -> None:
    with pytest.raises(ValidationError, match="egress"):
        spec(egress=["*"])
    with pytest.raises(ValidationError, match="network"):
        spec(network="everywhere")


def test_the_workers_settings_are_read_or_refused_whole() -> None:
    grants = parse_grants({"OVERNIGHT_EGRESS_ALLOW": "github.com, *.corp.example"})
    assert grants.egress == ("github.com", "*.corp.example")
    assert parse_grants({}).egress == DEFAULT_GRANTED
    assert parse_grants({"OVERNIGHT_ALLOW_OPEN_NETWORK": "1"}).allow_open_network
    for bad in (
        {"OVERNIGHT_EGRESS_ALLOW": "exa mple"},
        {"OVERNIGHT_ALLOW_OPEN_NETWORK": "maybe"},
        {"OVERNIGHT_EGRESS_ADDRESSES": "10.0.0.0/33"},
    ):
        with pytest.raises(BadSetting):
            parse_grants(bad)
    assert parse_granted("") == ()


def test_the_worker_names_private_addresses_by_network_and_port() -> None:
    rules = parse_address_rules("10.1.0.0/16, 127.0.0.1:8443, [fd00::1]:443")
    assert worker_allows(ipaddress.ip_address("10.1.2.3"), 22, rules)
    assert worker_allows(ipaddress.ip_address("127.0.0.1"), 8443, rules)
    assert not worker_allows(ipaddress.ip_address("127.0.0.1"), 7233, rules)
    assert worker_allows(ipaddress.ip_address("fd00::1"), 443, rules)
    assert not worker_allows(ipaddress.ip_address("169.254.169.254"), 80, rules)
    with pytest.raises(EgressError):
        parse_address_rules("127.0.0.1:99999")


def test_refusals_are_said_most_first_in_one_line() -> None:
    assert refusal_words({}) is None
    assert refusal_words({"169.254.169.254": 2, "evil.example": 14}) == (
        "blocked: 14 connections to evil.example, 2 to 169.254.169.254"
    )
    many = {f"h{i}.example": i + 1 for i in range(5)}
    assert refusal_words(many) == (
        "blocked: 5 connections to h4.example, 4 to h3.example, 3 to h2.example, "
        "3 to 2 other name(s)"
    )
    assert refusal_words({"one.example": 1}) == "blocked: 1 connection to one.example"


def test_normal_host_strips_brackets_and_refuses_garbage() -> None:
    assert normal_host("[::1]") == "::1"
    with pytest.raises(EgressError):
        normal_host("a/b")


def test_a_coding_agent_reaches_its_vendor_or_its_base_url() -> None:
    agent = CodingAgent(kind="claude-code", prompt="fix it")
    run = spec(agent=agent, agent_dir="", command="")
    assert "api.anthropic.com" in allowed_names(run, Grants())


def test_the_repos_credential_is_a_granted_name_the_sandbox_never_gets() -> None:
    run = spec(repo_credential="GITHUB_TOKEN")
    refused = refusals(run, Grants(), home="/x")
    assert refused and "field repo_credential: GITHUB_TOKEN" in refused[0]
    assert refusals(run, Grants(secret_env=("GITHUB_TOKEN",)), home="/x") == []
    with pytest.raises(ValidationError, match="would reach the sandbox"):
        spec(repo_credential="GITHUB_TOKEN", secret_env=["GITHUB_TOKEN"])
    with pytest.raises(ValidationError, match="repo_credential"):
        spec(repo_credential="not a name")
