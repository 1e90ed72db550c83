"""A coding agent on Runtime never holds its model key: Runtime's egress secret does.

The real dev server, a real worker, the real `withruntime` SDK against the strict fake Runtime
API and the real pinned Claude Code CLI against the fake model API, served over HTTPS as the
vendor's own host (`api.anthropic.com`, the fake's internet mapped to the loopback). The spec
names the vendor's key variable in `secret_env`, as the docs always said to.

The model's one tool call dumps the environment of every process it can see and greps every
file the sandbox may write for the key's prefix: the key's value is in none of it (nor in any
request the worker sent Runtime but the secret's store), the CLI's key variable holds
Runtime's placeholder, and the run finishes, because the fake model API received the real
key: Runtime's proxy put it in, on the way out. The run's end erases the secret.
"""

from __future__ import annotations

import asyncio
import secrets
import subprocess
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
import pytest_asyncio
from temporalio.client import Client

from activities.providers.local.isolation import bwrap_problem
from fakes.git_http import origin_fields
from fakes.model_api import FakeModelApi, Shell, text, tools
from fakes.runtime import FakeRuntime
from fakes.tls import CertAuthority
from overnight.cli import client as api
from overnight.core.agent_kinds import agent_cli
from overnight.core.coding_agents import install_folder
from overnight.core.models import RunSpec
from overnight.core.runtime_model_key import secret_name
from overnight.demo.sample_demo import make_origin
from overnight.worker.agent_clis import Installed
from tests.agent_clis.conftest import agents_home, installed_cli, measure  # noqa: F401
from tests.kinds import facts
from tests.live import granted, in_process_worker, new_run_id, nothing_left_running

CREDENTIAL = facts("claude-code").credential_env
PREFIX = "sk-overnight-held-"
KEY = PREFIX + secrets.token_hex(16)
VENDOR = "api.anthropic.com"
REPORT = "leak-report.txt"
# What a hostile agent reads: every process's environment and command line, and the text of
# every file in the places the sandbox may write (its CLI's config and transcripts among
# them), matched against the key's prefix (never the key: the command is itself seen).
DUMP = (
    "{ echo '== env'; env; echo '== processes';"
    " for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do tr '\\0' '\\n' < \"$f\"; done;"
    f" echo '== files'; grep -rIa -- '{PREFIX}' /workspace /home /tmp /var/tmp /run /overnight;"
    f" }} > /tmp/{REPORT} 2>/dev/null; mv /tmp/{REPORT} {REPORT}; wc -c < {REPORT}"
)


@pytest.fixture(scope="module")
def claude_code(installed_cli: Callable[[str], Installed]) -> Installed:  # noqa: F811
    if bwrap_problem() is not None:
        pytest.skip(f"the fake Runtime's sandboxes need bubblewrap: {bwrap_problem()}")
    installed = installed_cli("claude-code")
    place = install_folder(agent_cli("claude-code"))
    place.parent.mkdir(parents=True, exist_ok=True)
    if not place.exists():
        place.symlink_to(installed.folder)
    return installed


@pytest_asyncio.fixture(loop_scope="session")
async def world(
    dev_client: Client, claude_code: Installed, tmp_path: Path
) -> AsyncIterator[tuple[FakeRuntime, str, list[str]]]:
    home = tmp_path / "runtime-home"
    with pytest.MonkeyPatch.context() as env:
        env.setenv(CREDENTIAL, KEY)
        async with (
            FakeRuntime.local(home) as fake,
            nothing_left_running(dev_client, [home]) as runs,
            in_process_worker(dev_client, "rtkey", grants=granted(secret_env=[CREDENTIAL])) as q,
        ):
            fake.use(env, tmp_path / "config")
            yield fake, q, runs


@pytest.mark.timeout(420)
async def test_claude_code_on_runtime_finishes_with_a_key_it_never_holds(
    dev_client: Client, world: tuple[FakeRuntime, str, list[str]], tmp_path: Path
) -> None:
    fake, queue, runs = world
    run_id = new_run_id("rtkey")
    runs.append(run_id)
    files = make_origin(tmp_path / run_id)
    public = CertAuthority("the public web")  # stands for the public roots
    fake.trust(public.pem)
    script = [tools(Shell(DUMP), label="dump"), text("Nothing found.", label="final")]
    with FakeModelApi(script, tls=public.server_context(VENDOR)) as model:
        fake.reach(VENDOR, model.port)
        spec = RunSpec.model_validate(
            {
                "run_id": run_id,
                "provider": "runtime",
                **origin_fields(files.origin, "runtime"),
                # No base_url: the vendor's own API, over HTTPS through Runtime's proxy.
                "agent": {"kind": "claude-code", "prompt": "Look for the key."},
                "secret_env": [CREDENTIAL],
                "poll_seconds": 1,
                "stall_seconds": 120,
                "sandbox_timeout_seconds": 600,
            }
        )
        await api.start_run(dev_client, spec, task_queue=queue)
        result = await asyncio.wait_for(api.wait_result(dev_client, run_id), timeout=360)
        status = await api.get_status(dev_client, run_id)
        requests = model.requests()

    assert (result.outcome, result.attempts) == ("finished", 1)
    shown = subprocess.run(
        ["git", "-C", str(files.origin), "show", f"{spec.branch}:{REPORT}"],
        capture_output=True,
        text=True,
    )
    assert shown.returncode == 0, shown.stderr
    report = shown.stdout
    assert KEY not in report
    # It read what it should have: the CLI's key variable, holding Runtime's placeholder.
    placeholders = [
        line.split("=", 1)[1] for line in report.splitlines() if line.startswith(CREDENTIAL + "=")
    ]
    assert placeholders and all(p.startswith("rtsec_") for p in placeholders)
    # The worker sent the key to Runtime in the secret's store alone: in no create, spawn or
    # command (where a sandbox's environment comes from), and in no file it wrote there.
    sent = {(r.method, r.path) for r in fake.requests() if KEY.encode() in r.body}
    assert sent == {("PUT", f"/v1/egress-secrets/{secret_name(run_id)}")}
    # The model API got the real key, put in by Runtime's proxy, in every call.
    assert [r.label for r in requests] == ["dump", "final"]
    assert {r.headers.get("x-api-key") for r in requests} == {KEY}
    # The run's end erased its secret; its value is in no answer overnight keeps.
    assert secret_name(run_id) not in [s.name for s in fake.egress_secrets()]
    assert KEY not in status.model_dump_json() and KEY not in (result.checkpoint or "")
