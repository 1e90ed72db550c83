"""The worker's grants in its activities: `check_spec` answers what a spec may not ask for, the
steps that make or start an agent refuse it again before anything is made (a run begun before
the check, another workflow calling them), paths are judged where they really lead on this
machine, and the settings come from the worker's environment. Also: a webhook signs only with
a secret the worker allows, and a failed clone never shows the repository URL's credentials.
Real local sandboxes, a real loopback receiver."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.admission.grants import (
    own_loopback_ports,
    spec_refusals,
    unset_secrets,
    worker_grants,
)
from activities.models import (
    CreateSandboxInput,
    SpecCheckInput,
    StartAgentInput,
)
from activities.notify.activities import NotifyActivities
from activities.providers.local.engine import LocalEngine
from activities.providers.local.provider import LocalProvider
from activities.providers.protocol import CommandOutput, ProviderError
from activities.sandbox.activities import SandboxActivities
from activities.sandbox_base.setup import clone_and_switch
from overnight.core.grants import SPEC_REFUSED, BadSetting, Grants
from overnight.core.home import overnight_home
from overnight.core.models import RunSpec
from overnight.core.notify_spec import Webhook
from tests.activities.test_notify import SIGNING, a_notification, worker_env
from tests.webhook_receiver import Receiver

CREDENTIALED = "https://user:s3cret@127.0.0.1:1/x.git"


@pytest.fixture
def engine(tmp_path: Path) -> LocalEngine:
    return LocalEngine(tmp_path / "home")


@pytest.fixture
async def strict(engine: LocalEngine) -> AsyncIterator[SandboxActivities]:
    """The activities of a worker that grants nothing; its sandboxes stopped afterwards."""
    async with SandboxActivities(providers={"local": LocalProvider(engine)}, grants=Grants()) as a:
        yield a
    for meta in engine.list_sandboxes():
        engine.stop(meta.id)


@pytest.fixture
def agent_dir(tmp_path: Path) -> Path:
    path = tmp_path / "agent"
    path.mkdir()
    (path / "main.py").write_text("import time; time.sleep(30)\n")
    return path


def spec(agent_dir: Path, **fields: Any) -> RunSpec:
    values: dict[str, Any] = {
        "run_id": f"run-{uuid.uuid4().hex[:8]}",
        "repo": "https://example.invalid/app.git",
        "agent_dir": str(agent_dir),
        "command": "python3 /workspace/agent/main.py",
        **fields,
    }
    return RunSpec.model_validate(values)


async def test_check_spec_answers_what_the_worker_does_not_grant(
    strict: SandboxActivities, agent_dir: Path
) -> None:
    asked = spec(agent_dir, isolation="none", secret_env=["RUNTIME_API_KEY"])
    checked = await ActivityEnvironment().run(strict.check_spec, SpecCheckInput(spec=asked))
    assert [r.split(":")[0] for r in checked.refusals] == ["field isolation", "field secret_env"]
    fine = await ActivityEnvironment().run(strict.check_spec, SpecCheckInput(spec=spec(agent_dir)))
    assert fine.refusals == []


def test_a_granted_secret_the_environment_does_not_set_is_refused_at_the_start(
    agent_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MY_UNSET_TOKEN", raising=False)
    monkeypatch.setenv("MY_SET_TOKEN", "x")
    asked = spec(agent_dir, secret_env=["MY_SET_TOKEN", "MY_UNSET_TOKEN", "NOT_GRANTED"])
    grants = Grants(secret_env=("MY_SET_TOKEN", "MY_UNSET_TOKEN"))
    assert unset_secrets(asked, grants) == [
        "field secret_env: MY_UNSET_TOKEN is not set in this worker's environment (set it "
        "where the worker runs, then start the run again)"
    ]  # the name not granted is the allow-list's refusal, not this one
    assert unset_secrets(asked, grants, {"MY_SET_TOKEN": "", "MY_UNSET_TOKEN": "y"}) == []


@pytest.mark.parametrize(
    "fields",
    [
        {"isolation": "none"},
        {"secret_env": ["RUNTIME_API_KEY"]},
        {"notify": [{"url": "https://hooks.example/a", "secret_env": "TEMPORAL_API_KEY"}]},
    ],
    ids=["isolation-none", "secret", "webhook-secret"],
)
async def test_a_create_refuses_the_spec_again_before_anything_is_made(
    strict: SandboxActivities, engine: LocalEngine, agent_dir: Path, fields: dict[str, Any]
) -> None:
    run = spec(agent_dir, **fields)
    with pytest.raises(ApplicationError) as refused:
        await ActivityEnvironment().run(
            strict.create_sandbox, CreateSandboxInput(spec=run, attempt=1)
        )
    assert refused.value.type == SPEC_REFUSED and refused.value.non_retryable
    assert refused.value.message.startswith("spec: field ")
    assert engine.list_sandboxes(include_stopped=True) == []


async def test_a_start_in_a_sandbox_refuses_a_secret_the_worker_does_not_grant(
    strict: SandboxActivities, engine: LocalEngine, agent_dir: Path
) -> None:
    engine.get_or_create("someone-elses-1")
    start = StartAgentInput(
        spec=spec(agent_dir, secret_env=["TEMPORAL_API_KEY"]),
        sandbox_id="someone-elses-1",
        attempt=1,
        fresh_start=1,
    )
    with pytest.raises(ApplicationError) as refused:
        await ActivityEnvironment().run(strict.start_agent, start)
    assert refused.value.type == SPEC_REFUSED
    assert "OVERNIGHT_SECRET_ENV=TEMPORAL_API_KEY" in refused.value.message
    processes = engine.folder("someone-elses-1") / "processes"
    assert not processes.exists() or list(processes.iterdir()) == []


def test_a_bind_is_judged_where_its_links_lead_on_this_machine(
    tmp_path: Path, agent_dir: Path
) -> None:
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    (allowed / "to-home").symlink_to(overnight_home())
    (allowed / "to-etc").symlink_to("/etc")
    (allowed / "data").mkdir()
    grants = Grants(bind_roots=(str(allowed),))

    def found(path: Path) -> list[str]:
        return spec_refusals(spec(agent_dir, binds=[{"path": str(path)}]), grants)

    assert found(allowed / "data") == []
    [into_home] = found(allowed / "to-home")
    assert "is inside the worker's state directory" in into_home
    [outside] = found(allowed / "to-etc")
    assert f"{allowed / 'to-etc'} (really /etc) is not wholly inside" in outside
    # An agent_dir that leads into the state directory (another run's sandbox) is refused.
    (tmp_path / "agent-link").symlink_to(overnight_home())
    [agent] = spec_refusals(spec(tmp_path / "agent-link"), Grants())
    assert agent.startswith(f"field agent_dir: {tmp_path / 'agent-link'} (really ")


def test_the_grants_come_from_the_workers_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OVERNIGHT_ALLOW_UNISOLATED", "1")
    monkeypatch.setenv("OVERNIGHT_SECRET_ENV", "GITHUB_TOKEN")
    monkeypatch.setenv("OVERNIGHT_BIND_ROOTS", "/data")
    monkeypatch.delenv("OVERNIGHT_WRITABLE_BIND_ROOTS", raising=False)
    expected = Grants(allow_unisolated=True, secret_env=("GITHUB_TOKEN",), bind_roots=("/data",))
    assert worker_grants() == expected
    assert SandboxActivities(None).grants == expected
    monkeypatch.setenv("OVERNIGHT_SECRET_ENV", "*")
    with pytest.raises(BadSetting, match="OVERNIGHT_SECRET_ENV"):
        SandboxActivities(None)  # a worker does not start on a grant it cannot read


# ----- webhooks -----


async def test_a_webhook_naming_a_secret_the_worker_does_not_allow_is_not_sent() -> None:
    env = worker_env(RUNTIME_API_KEY="rk-live-123", HOOK_SIGNING="hook-secret")
    with Receiver(secret="rk-live-123") as leaky, Receiver(secret="hook-secret") as fine:
        hooks = [
            Webhook(url=leaky.url, secret_env="RUNTIME_API_KEY"),
            Webhook(url=fine.url, secret_env="HOOK_SIGNING"),
        ]
        notify = NotifyActivities(None, env, grants=Grants(secret_env=("HOOK_SIGNING",)))
        sent = await notify.send_notification(a_notification(hooks))
    assert (sent.refused, sent.delivered) == (["spec-0"], ["spec-1"])
    assert leaky.seen == []  # nothing signed with the worker's key was ever posted
    [got] = fine.accepted
    assert got.signed and got.fresh


async def test_the_event_id_is_in_the_signed_body_and_is_the_idempotency_key() -> None:
    with Receiver(secret=SIGNING) as receiver:
        note = a_notification([Webhook(url=receiver.url)])
        await NotifyActivities(None, worker_env()).send_notification(note)
    [got] = receiver.accepted
    assert got.signed  # HMAC over the timestamp and the exact body
    assert got.json["event_id"] == got.headers["idempotency-key"] == note.event_id
    assert receiver.verify(got.headers, got.body)
    tampered = got.body.replace(note.event_id.encode(), b"night-run-99")
    assert not receiver.verify(got.headers, tampered)
    # Replayed (within the timestamp's window) under another Idempotency-Key: still a repeat.
    forged = {**got.headers, "idempotency-key": "night-run-99"}
    assert receiver._take(forged, got.body) == 200
    assert receiver.seen[-1].repeat and len(receiver.accepted) == 1


# ----- the repository's credentials -----


class _EchoingGit:
    """A provider whose git echoes the URL it was given, credentials and all (old gits do)."""

    async def run(self, sandbox_id: str, command: str, **_: Any) -> CommandOutput:
        url = command.split("-- ", 1)[1].split(" ", 1)[0].strip("'")
        return CommandOutput(
            exit_code=128,
            stdout="",
            stderr=f"Cloning into '/workspace/app.partial'...\nfatal: unable to access '{url}/': "
            "The requested URL returned error: 403\n",
        )


@pytest.mark.parametrize(
    ("repo", "secrets"),
    [
        (CREDENTIALED, ["s3cret", "user:"]),
        ("https://ghp_T0kenValue@127.0.0.1:1/x.git", ["ghp_T0kenValue"]),
        ("https://127.0.0.1:1/x.git?access_token=t0k%3Den", ["t0k", "%3Den"]),
    ],
)
async def test_a_failed_clone_never_shows_the_urls_credentials(
    agent_dir: Path, repo: str, secrets: list[str]
) -> None:
    with pytest.raises((ProviderError, ApplicationError)) as failed:
        await clone_and_switch(_EchoingGit(), "box", spec(agent_dir, repo=repo))  # type: ignore[arg-type]
    message = str(failed.value)
    assert "cloning https://127.0.0.1:1/x.git" in message and "403" in message
    for secret in secrets:
        assert secret not in message, message


async def test_a_real_clone_from_a_credentialed_url_fails_without_showing_them(
    strict: SandboxActivities, agent_dir: Path
) -> None:
    run = spec(agent_dir, repo=CREDENTIALED)
    with pytest.raises(ApplicationError) as failed:
        await ActivityEnvironment().run(
            strict.create_sandbox, CreateSandboxInput(spec=run, attempt=1)
        )
    message = failed.value.message
    assert message.startswith("cloning https://127.0.0.1:1/x.git: connection refused ("), message
    assert "s3cret" not in message and "user" not in message


def test_the_workers_own_loopback_temporal_server_and_its_ui_are_protected_ports() -> None:
    assert own_loopback_ports("127.0.0.1:7233") == {7233, 8233}
    assert own_loopback_ports("localhost:40001") == {40001, 41001}
    assert own_loopback_ports("my-ns.a1b2c.tmprl.cloud:7233") == set()
    assert own_loopback_ports(None) == set()
