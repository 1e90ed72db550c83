"""The steps that prepare a sandbox for the agent: clone, branch, agent files, checkpoint, env.

Every step is safe to repeat, because a create activity may be retried after any of them:
the clone goes to a temporary folder renamed into place, the branch switch is a no-op on the
right branch, uploads merge, and the checkpoint is written only if the sandbox has none yet
(an agent that already runs there owns it).
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from urllib.parse import urlsplit

import overnight
from activities.errors import ErrorType, non_retryable
from activities.models import SandboxInfo
from activities.providers.protocol import (
    GitOrigin,
    ModelAccess,
    ProviderError,
    SandboxNotRunning,
    SandboxProvider,
    SandboxRequest,
    ServesGit,
)
from activities.sandbox_base.git_words import clone_failure, clone_failure_text
from overnight.core.constants import KIT_MOUNT, SNAPSHOT_ANSWER
from overnight.core.done_check import DONE_CHECK_FILE, DONE_CHECK_FILE_ENV
from overnight.core.grants import Grants, allowed_names, local_repo_path
from overnight.core.isolation import HostBind, is_under
from overnight.core.model_access import kept_out, model_plan
from overnight.core.models import RunSpec
from overnight.core.provider_traits import traits
from overnight.core.runtime_model_key import held_by_runtime
from overnight.core.specs import redact_url, scrub_url

# The agent kit's folder on the worker, uploaded to KIT_MOUNT in every sandbox.
KIT_DIR = Path(overnight.__file__).resolve().parent / "agent_kit"

APP_DIR = "/workspace/app"
CLONE_TIMEOUT_SECONDS = 20 * 60
GIT_TIMEOUT_SECONDS = 120


def agent_env(
    spec: RunSpec,
    *,
    attempt: int,
    restart_reason: str,
    environ: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The agent's variables: spec.env, overnight's own, and the secrets from the worker's env.

    The result holds secret values: pass it only to the provider's start, never to a result,
    a log or an error message.
    """
    source = os.environ if environ is None else environ
    env = dict(spec.env)
    # The gateway, or Runtime's proxy, adds it to the calls: the sandbox never holds it.
    held = kept_out(spec) | held_by_runtime(spec)
    for name in spec.secret_env:
        if name in held:
            continue
        value = source.get(name)
        if value is None:
            raise non_retryable(
                ErrorType.MISSING_SECRET,
                f"secret variable {name} is not set in the worker's environment",
            )
        env[name] = value
    env.update(
        OVERNIGHT_RUN_ID=spec.run_id,
        OVERNIGHT_ATTEMPT=str(attempt),
        OVERNIGHT_RESTART_REASON=restart_reason,
        OVERNIGHT_CHECKPOINT=spec.checkpoint_path,
        OVERNIGHT_FRESH_CONTEXT_EXIT_CODE=str(spec.fresh_context_exit_code),
        # The agent kit's `snapshot_here()` asks for snapshots only in snapshot mode.
        OVERNIGHT_RECOVERY=spec.recovery,
        # The agent kit first: `import overnight_agent` works with nothing installed.
        PYTHONPATH=":".join(p for p in (KIT_MOUNT, spec.env.get("PYTHONPATH", "")) if p),
    )
    if spec.recovery == "snapshot":
        # Where `snapshot_here()` reads the answer (a variable, so an unisolated local
        # sandbox maps it to its folder like every /workspace path).
        env["OVERNIGHT_SNAPSHOT_ANSWER"] = SNAPSHOT_ANSWER
    ci_rounds = spec.pull_request is not None and spec.pull_request.until_checks_pass
    if spec.done_when or ci_rounds:
        # Where the kit finds a failed done check, or a failing CI check of the run's pull
        # request (mapped like every /workspace path).
        env[DONE_CHECK_FILE_ENV] = DONE_CHECK_FILE
    return env


def clone_source(repo: str) -> str:
    """The repo as git should see it: a local path made absolute (clones run elsewhere)."""
    if "://" in repo or re.match(r"^[\w.-]+@[\w.-]+:", repo):
        return repo
    path = Path(repo).expanduser()
    return str(path.resolve()) if path.exists() else repo


async def sandbox_origin(provider: SandboxProvider, sandbox_id: str, repo: str) -> str:
    """The origin as the sandbox's git reaches it: served by its provider when it can (the
    local gateway: pushes held to the run's refs, no bind or permission of the folder
    needed), else the repo as `clone_source` gives it."""
    if isinstance(provider, ServesGit):
        served = await provider.git_remote(sandbox_id)
        if served is not None:
            return served
    return clone_source(repo)


_GATEWAY_TOKEN = re.compile(r"^[0-9a-f]{32}$")


def origin_scrubber(given: str, used: str) -> Callable[[str], str]:
    """What git said of the origin at `used` (the spec's `given`, or the way its sandbox
    reaches it: the gateway's URL), as a person reads it: credentials redacted, and the
    gateway's URL named as the spec's origin, which is what the person wrote."""
    shown = redact_url(given)
    served = redact_url(used)
    # The gateway's URL carries the sandbox's token in its path: never said, whole or alone.
    tokens = [part for part in urlsplit(used).path.split("/") if _GATEWAY_TOKEN.match(part)]

    def scrubbed(text: str) -> str:
        text = scrub_url(scrub_url(text, given), used)
        if served != shown and "://" in served:
            text = text.replace(served + "/", shown + "/").replace(served, shown)
        for token in tokens:
            text = text.replace(token, "***")
        return text

    return scrubbed


def clone_script(repo: str) -> str:
    """Clone into a partial folder, then move it in place. `--no-local`: a local origin goes
    through git's transport too, which never reads its objects folder file by file, where a
    push of another sandbox's user keeps a folder only that user may read (and leaves it
    there when killed mid-push)."""
    partial = f"{APP_DIR}.partial"
    return (
        f"set -e\n"
        f"if [ -d {APP_DIR}/.git ]; then exit 0; fi\n"
        f"rm -rf {partial}\n"
        f"GIT_TERMINAL_PROMPT=0 git clone --quiet --no-local -- {shlex.quote(repo)} {partial}\n"
        f"rm -rf {APP_DIR}\n"
        f"mv {partial} {APP_DIR}\n"
    )


def branch_script(branch: str) -> str:
    """Switch to `branch`: the local one, else track origin's, else create it here."""
    b = shlex.quote(branch)
    return (
        "set -e\n"
        f"if git rev-parse --verify --quiet refs/heads/{b} >/dev/null; then\n"
        f"  git switch --quiet {b}\n"
        f"elif git rev-parse --verify --quiet refs/remotes/origin/{b} >/dev/null; then\n"
        f"  git switch --quiet --track origin/{b}\n"
        "else\n"
        f"  git switch --quiet -c {b}\n"
        "fi\n"
    )


def spec_request(
    spec: RunSpec,
    grants: Grants | None,
    *,
    name: str,
    labels: dict[str, str],
    max_total_cost_micros: int | None,
) -> SandboxRequest:
    """A sandbox of the run as its spec and the worker's grants shape it (size, lease, disk,
    isolation, binds, host ports, network), for its agent (`create_sandbox`, which adds what
    a coding agent needs) or for its done check (activities/delivery/done_sandbox.py); its lease
    ends in a pause."""
    return SandboxRequest(
        name=name,
        labels=labels,
        timeout_seconds=spec.sandbox_timeout_seconds,
        vcpu=spec.vcpu,
        memory_mib=spec.memory_mib,
        disk_mib=spec.disk_mib,
        on_lease_end="pause",
        max_total_cost_micros=max_total_cost_micros,
        isolation=spec.isolation,
        binds=tuple(spec.binds),
        host_ports=tuple(spec.host_ports),
        egress=allowed_names(spec, grants),
        origin=git_origin(spec),
        origin_bind=repo_bind(spec),
    )


def model_access(spec: RunSpec, cap_usd: float | None) -> ModelAccess | None:
    """The run's model calls as the gateway serves its agent's sandbox
    (overnight/core/model_access.py), capped at `cap_usd` on its host; a done check's sandbox
    gets none."""
    plan = model_plan(spec)
    if plan is None:
        return None
    return ModelAccess(
        plan.upstream, plan.credential_env, spec.run_id, cap_usd, plan.credential_header
    )


def git_origin(spec: RunSpec) -> GitOrigin | None:
    """The run's origin as a provider may serve it: a folder on the worker, or an http(s)
    URL (with the worker's credential for it); None for another (ssh: the sandbox's own)."""
    if local_repo_path(spec.repo) is not None:
        return GitOrigin(path=clone_source(spec.repo), branch=spec.branch, run_id=spec.run_id)
    if urlsplit(spec.repo).scheme not in ("http", "https"):
        return None
    return GitOrigin(
        path="",
        branch=spec.branch,
        run_id=spec.run_id,
        url=spec.repo,
        credential_env=spec.repo_credential,
    )


async def running_sandbox(
    provider: SandboxProvider, request: SandboxRequest
) -> tuple[SandboxInfo, bool]:
    """The sandbox `request` names, made now (True) or found by its name (a retried create),
    running; `SandboxGone` when that name's sandbox already ended (the name is taken)."""
    sandbox, created = await provider.get_or_create(request)
    if not created and sandbox.state == "paused":
        # Its lease ended while this create was retried (sandboxes pause at their lease end):
        # carry on in it with a fresh lease, as Runtime's get-or-create does for a paused
        # holder of the name.
        sandbox = await provider.wake(sandbox.sandbox_id)
    if not created and sandbox.state in ("stopped", "missing"):
        raise non_retryable(
            ErrorType.SANDBOX_GONE,
            f"sandbox {sandbox.sandbox_id} already ended ({sandbox.stop_reason})",
        )
    if sandbox.state != "running":
        raise SandboxNotRunning(sandbox.sandbox_id, sandbox.state)
    return sandbox, created


async def clone_and_switch(provider: SandboxProvider, sandbox_id: str, spec: RunSpec) -> None:
    """Clone the repo and switch to the run's branch. Errors never carry the repository URL's
    credentials (its user info, its query's values): they go into restart reasons, the
    status and notifications."""
    repo = await sandbox_origin(provider, sandbox_id, spec.repo)
    scrubbed = origin_scrubber(spec.repo, repo)

    try:
        cloned = await provider.run(
            sandbox_id, clone_script(repo), cwd="/workspace", timeout_seconds=CLONE_TIMEOUT_SECONDS
        )
    except ProviderError as error:
        message = scrubbed(str(error))
        raise ProviderError(message, kind=error.kind, retryable=error.retryable) from None
    if cloned.exit_code != 0:
        # Scrubbed before it is cut: a credential cut in two would slip through.
        failure = clone_failure(scrubbed(cloned.stderr))
        if cloned.timed_out:
            failure = replace(failure, words="timed out", permanent=False)
        message = clone_failure_text(redact_url(spec.repo), failure)
        if failure.permanent:
            raise non_retryable(ErrorType.SPEC_UNUSABLE, f"field repo: {message}")
        raise ProviderError(message, kind=ErrorType.SETUP_FAILED)
    switched = await provider.run(
        sandbox_id, branch_script(spec.branch), cwd=APP_DIR, timeout_seconds=GIT_TIMEOUT_SECONDS
    )
    if switched.timed_out:
        # Cut off at the sandbox's lease end (a run is never given more): its retry wakes the
        # paused sandbox with a fresh lease. The branch is not to blame.
        raise ProviderError(
            f"switching to branch {spec.branch} timed out", kind=ErrorType.SETUP_FAILED
        )
    if switched.exit_code != 0:
        raise non_retryable(
            ErrorType.SPEC_UNUSABLE,
            f"field branch: cannot switch to branch {spec.branch}: "
            f"{_tail(scrubbed(switched.stderr))}",
        )


async def write_checkpoint_once(
    provider: SandboxProvider, sandbox_id: str, path: str, text: str
) -> bool:
    """Write the checkpoint unless one is there (the agent's own, after a retried create)."""
    found = await provider.read_file(sandbox_id, path, 1)
    if found.status != "missing":
        return False
    await provider.write_file(sandbox_id, path, text.encode())
    return True


def _tail(text: str, limit: int = 500) -> str:
    text = text.strip()
    return text if len(text) <= limit else "…" + text[-limit:]


def spec_binds(spec: RunSpec) -> tuple[HostBind, ...]:
    """The spec's binds, and its `repo` read-only when it is a folder on this machine (the
    clone reads it there) and no bind shows it already."""
    repo = repo_bind(spec)
    return (*spec.binds, *([repo] if repo is not None else []))


def repo_bind(spec: RunSpec) -> HostBind | None:
    """The spec's `repo` as a read-only bind when it is a folder on this machine that no bind
    of the spec shows: what a local sandbox its provider does not serve the origin to clones
    from (`SandboxRequest.origin_bind`)."""
    if not traits(spec.provider).mounts_worker_folders:
        return None
    repo = clone_source(spec.repo)
    if repo.startswith("file://"):
        repo = urlsplit(repo).path
    if not repo.startswith("/") or not os.path.exists(repo):
        return None
    if any(is_under(repo, [bind.path]) for bind in spec.binds):
        return None
    return HostBind(path=repo)
