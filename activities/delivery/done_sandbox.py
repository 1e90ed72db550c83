"""The done check's own sandbox (`RunSpec.done_when`): the run's work pushed, confirmed on the
origin, and a fresh sandbox made with a clean clone at that commit, where the checks then run
(activities/delivery/done_checks.py) as CI would run them.

Why: a check run in the agent's sandbox runs with the agent's `HOME`, its processes and every
file it left outside the clone, so the agent can make any check pass without touching the
work (a `usercustomize.py` in its user site that exits 0 for `check.py`, a leftover server the
check asks). Here nothing of the agent's reaches the check but the commit:

- the workspace's clone is committed as a keep commits it (activities/workspace/git_scripts.py: the
  agent's own index, HEAD and git config left alone; `.gitignore` honoured) and pushed to the
  run's ref `refs/overnight/<run_id>/check-<n>`;
- the worker asks the origin itself (`git ls-remote`, activities/workspace/origin_refs.py) that the
  ref holds that exact commit: the sandbox's word that it pushed is the agent's;
- sandbox `{run_id}-check-<n>` is made through the same provider protocol as every sandbox
  (labelled with the run, its lease ending in a stop), given the spec's read-only binds and
  host ports but no writable bind, no worker mount and no agent; the repository is cloned
  there, the run's branch put at the commit by its id (a ref the agent moves meanwhile changes
  nothing), and the commit checked out is confirmed.

Work that cannot be pushed or confirmed is an answer (`problem`), told to the agent like a
failed check; a sandbox that cannot be made or cloned is an error (the workflow sweeps what it
left). Every step is safe to retry: the push makes the same commit from the same files, the
create finds the sandbox by its name, the clone is skipped once made.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from temporalio import activity

from activities.admission.grants import refuse_unless_allowed
from activities.delivery.done_checks import tell_agent
from activities.errors import ErrorType, activity_errors
from activities.heartbeat import auto_heartbeat
from activities.models import ActivityName, SandboxInfo
from activities.models.done_sandbox import DoneCheckSandbox, PrepareDoneCheckInput
from activities.providers.money import ensure_daily_room
from activities.providers.protocol import ProviderError, SandboxProvider, SandboxRequest
from activities.sandbox_base.setup import (
    APP_DIR,
    clone_and_switch,
    origin_scrubber,
    repo_bind,
    running_sandbox,
    sandbox_origin,
    spec_request,
)
from activities.workspace import work_push
from overnight.core.constants import LABEL_CHECK, LABEL_RUN
from overnight.core.done_check import failure_file_text
from overnight.core.grants import Grants
from overnight.core.models import RunSpec
from overnight.core.workspace_spec import check_ref_name, size_text

ProviderGetter = Callable[[str], Awaitable[SandboxProvider]]

# The push in the agent's sandbox, and the checkout in the check's: killed past these.
PUSH_SECONDS = work_push.PUSH_SECONDS
CHECKOUT_SECONDS = 600
# What the checkout script prints last when the clone is at the commit.
READY = "overnight-check ready"


def check_sandbox_name(run_id: str, number: int) -> str:
    return f"{run_id}-check-{number}"


def check_request(input: PrepareDoneCheckInput, grants: Grants | None) -> SandboxRequest:
    """The run's sandbox as its agent's is made (activities.sandbox_base.setup.spec_request), but
    for its done check: named and labelled so, no writable bind, and a lease that ends in a
    stop (nothing in it is worth keeping: with no worker left to stop it, its lease does)."""
    spec = input.spec
    made = spec_request(
        spec,
        grants,
        name=check_sandbox_name(spec.run_id, input.number),
        labels={LABEL_RUN: spec.run_id, LABEL_CHECK: str(input.number)},
        max_total_cost_micros=input.max_total_cost_micros,
    )
    kept = spec.model_copy(update={"binds": [b for b in spec.binds if not b.writable]})
    return replace(
        made,
        timeout_seconds=input.timeout_seconds,
        on_lease_end="stop",
        binds=tuple(kept.binds),
        origin_bind=repo_bind(kept),
    )


def checkout_script(repo: str, ref: str, commit: str) -> str:
    """Put the fresh clone's branch at `commit`, fetched by its id (or, from an origin that
    serves only refs, with `ref`), and say the commit checked out."""
    c, r, src = shlex.quote(commit), shlex.quote(ref), shlex.quote(repo)
    return (
        "set -u\n"
        "export GIT_TERMINAL_PROMPT=0\n"
        'g() { git -c core.hooksPath=/dev/null -c protocol.ext.allow=never "$@"; }\n'
        f"if ! g cat-file -e {c}^{{commit}} 2>/dev/null; then\n"
        f"  g fetch --quiet --no-tags -- {src} {c} 2>/dev/null ||\n"
        f"    g fetch --quiet --no-tags -- {src} {r} || exit 3\n"
        "fi\n"
        f"g reset --quiet --hard {c} || exit 4\n"
        f'echo "{READY} $(g rev-parse --verify -q HEAD)"\n'
    )


class DoneSandboxActivities:
    def __init__(
        self,
        provider: ProviderGetter,
        heartbeat_seconds: float | None = None,
        *,
        grants: Grants | None = None,
        own_ports: frozenset[int] = frozenset(),
    ) -> None:
        self._provider = provider
        self._heartbeat_seconds = heartbeat_seconds
        self._grants = grants
        self._own_ports = own_ports

    def all(self) -> list[Callable[..., Any]]:
        return [self.prepare_done_check]

    @activity.defn(name=ActivityName.PREPARE_DONE_CHECK)
    async def prepare_done_check(self, input: PrepareDoneCheckInput) -> DoneCheckSandbox:
        spec = input.spec
        if self._grants is not None:
            refuse_unless_allowed(spec, self._grants, self._own_ports)
        provider = await self._provider(spec.provider)
        ref = check_ref_name(spec.run_id, input.number)
        async with auto_heartbeat(self._heartbeat_seconds):
            with activity_errors():
                began = time.monotonic()
                commit, problem = await push_work(provider, input, ref)
                pushed = round(time.monotonic() - began, 3)
                if commit is None:
                    await _tell(provider, input, problem)
                    return DoneCheckSandbox(ref=ref, problem=problem, push_seconds=pushed)
                began = time.monotonic()
                box = await made(provider, input, self._grants)
                await ready_at(provider, box.sandbox_id, spec, ref, commit)
        return DoneCheckSandbox(
            sandbox_id=box.sandbox_id,
            ref=ref,
            commit=commit,
            lease_ends_at=box.lease_ends_at,
            push_seconds=pushed,
            ready_seconds=round(time.monotonic() - began, 3),
        )


async def push_work(
    provider: SandboxProvider, input: PrepareDoneCheckInput, ref: str
) -> tuple[str | None, str]:
    """The commit of the agent's work, pushed to `ref` and seen there by the worker; or
    (None, why not)."""
    spec = input.spec
    pushed = await work_push.push_work(
        provider,
        spec,
        input.agent_sandbox_id,
        ref,
        message=f"overnight: the work of run {spec.run_id} for its done check {input.number}",
        at=input.at,
        previous=input.previous,
        max_bytes=spec.max_workspace_mib * 1024 * 1024,
    )
    if pushed.kind == "pushed":
        return pushed.commit, ""
    if pushed.kind == "unconfirmed":
        return None, f"the work was not checked: the sandbox said it pushed it, but {pushed.detail}"
    if pushed.kind == "over":
        found = size_text(pushed.bytes)
        limit = size_text(spec.max_workspace_mib * 1024 * 1024)
        return (
            None,
            f"the work was not checked: pushing it would take {found}, over "
            f"max_workspace_mib ({limit})",
        )
    if pushed.kind == "refused":
        return None, f"the work was not checked: it could not be pushed: {pushed.detail}"[:500]
    why = f"timed out after {PUSH_SECONDS} s" if pushed.timed_out else "no answer"
    tail = pushed.detail
    return None, f"the work was not checked: its push {why}{': ' + tail if tail else ''}"


async def made(
    provider: SandboxProvider, input: PrepareDoneCheckInput, grants: Grants | None
) -> SandboxInfo:
    """The check sandbox, made now or found by its name (a retry), running."""
    if not activity.in_activity() or activity.info().attempt == 1:
        # Only before the first try: a retry may find the sandbox its first try made.
        what = f"done check sandbox {input.number}'s lease"
        await ensure_daily_room(provider, input.lease_cost_micros, what)
    box, _ = await running_sandbox(provider, check_request(input, grants))
    return box


async def ready_at(
    provider: SandboxProvider, sandbox_id: str, spec: RunSpec, ref: str, commit: str
) -> None:
    """A clean clone of the run's branch in the check sandbox, at `commit` (confirmed)."""
    await clone_and_switch(provider, sandbox_id, spec)
    repo = await sandbox_origin(provider, sandbox_id, spec.repo)
    ran = await provider.run(
        sandbox_id,
        checkout_script(repo, ref, commit),
        cwd=APP_DIR,
        timeout_seconds=CHECKOUT_SECONDS,
    )
    at = ran.stdout.strip().rsplit("\n", 1)[-1]
    if ran.exit_code != 0 or at != f"{READY} {commit}":
        words = origin_scrubber(spec.repo, repo)((ran.stderr or ran.stdout).strip()[-300:])
        raise ProviderError(
            f"the done check's clone could not be put at {commit[:12]}: {words or 'no answer'}",
            kind=ErrorType.SETUP_FAILED,
        )


async def _tell(provider: SandboxProvider, input: PrepareDoneCheckInput, problem: str) -> None:
    """The agent, started again, finds why its work was not checked, as for a failed check."""
    commands = input.spec.done_when
    text = failure_file_text(commands[0] if commands else "done_when", problem, "", False)
    await tell_agent(provider, input.agent_sandbox_id, text)
