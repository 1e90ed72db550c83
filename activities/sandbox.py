"""The sandbox activities: thin steps from one model to another, through a provider.

`SandboxActivities.from_env(client)` holds the providers: `local` always, `runtime` built on
first use inside the worker's event loop (its client belongs to that loop), from the worker's
`RUNTIME_API_KEY`; and the worker's grants (activities.grants: what a spec may ask for), which
`check_spec` answers at a run's start and the steps that make or start agents check again.
Provider failures become activity errors in one place (`activities.errors.activity_errors`);
long steps heartbeat (`activities.heartbeat`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any

from temporalio import activity
from temporalio.client import Client

from activities import coding_agent_sessions as sessions
from activities import coding_agent_setup as coding
from activities import sandbox_setup as setup
from activities import workspace
from activities.admission import AdmissionActivities, worker_admission, worker_key
from activities.base_url_check import base_url_problems
from activities.branch_push import BranchPushActivities
from activities.checkpoints import read_checkpoint
from activities.ci_checks import CiActivities
from activities.coding_agent_template import CliTemplates
from activities.daily_limit import DailyLimitActivities
from activities.done_checks import DoneCheckActivities
from activities.done_sandbox import DoneSandboxActivities
from activities.errors import ErrorType, activity_errors, non_retryable
from activities.grants import (
    own_loopback_ports,
    refuse_unless_allowed,
    spec_refusals,
    unset_secrets,
    worker_grants,
)
from activities.heartbeat import auto_heartbeat, hand_over_on_shutdown
from activities.host_check import HostCheckActivities
from activities.kit_requests import KitRequestActivities
from activities.last_words import read_last_words
from activities.model_calls import ModelCallActivities, model_wiring
from activities.models import (
    ActivityName,
    AgentStarted,
    CheckpointSalvage,
    CreateSandboxInput,
    Observation,
    ObserveInput,
    ReadCheckpointInput,
    SearchAttributeCheck,
    SearchAttributeCheckInput,
    SpecCheck,
    SpecCheckInput,
    StartAgentInput,
)
from activities.observe import observe
from activities.providers import registry
from activities.providers.money import ensure_daily_room, read_money
from activities.providers.protocol import (
    AgentLaunch,
    SandboxProvider,
)
from activities.providers.registry import ProviderFactory
from activities.providers.runtime.watch_stream import exit_marker_path
from activities.pull_request import PullRequestActivities
from activities.repo_check import repo_refusals
from activities.requests_file import read_requests
from activities.retry_notes import tell_run
from activities.runtime_model_key import hold_model_key, keyed_launch
from activities.sandbox_lifecycle import LifecycleActivities, settle
from activities.search_attributes import SearchAttributeCache
from activities.snapshots import SnapshotActivities, start_restored, usable_restore
from activities.workspace import WorkspaceActivities
from overnight.admission import AdmissionSettings, admission_refusals, terms_for
from overnight.constants import (
    AGENT_MOUNT,
    KIT_MOUNT,
    LABEL_ATTEMPT,
    LABEL_RUN,
)
from overnight.done_check import DONE_CHECK_FILE
from overnight.grants import Grants
from overnight.host_settings import host_lost_seconds
from overnight.hosts import host_bound
from overnight.model_access import host_cap
from overnight.models import RunSpec
from overnight.provider_traits import traits


class SandboxActivities:
    """The activities, registered under `ActivityName` names (see `all()`)."""

    def __init__(
        self,
        client: Client | None = None,
        *,
        providers: Mapping[str, SandboxProvider] | None = None,
        factories: Mapping[str, ProviderFactory] | None = None,
        heartbeat_seconds: float | None = None,
        grants: Grants | None = None,
        admission: AdmissionSettings | None = None,
        host_queue: str | None = None,
    ):
        """`grants`: what specs may ask for; `admission`: how many runs this pool lets go at
        once (overnight/admission.py); without them, the worker's environment says.
        `host_queue`: this host's own task queue (overnight.hosts), which the local sandboxes
        made here name as theirs (None: they name none, and any worker is sent their steps)."""
        self._client = client
        self._host_queue = host_queue
        self._host_checks = HostCheckActivities(client)
        self._grants = worker_grants() if grants is None else grants
        self._admission = worker_admission() if admission is None else admission
        self._key = worker_key()
        self._providers: dict[str, SandboxProvider] = dict(providers or {})
        self._factories = dict(factories or {})
        self._heartbeat_seconds = heartbeat_seconds
        self._building = asyncio.Lock()
        self._search_attributes = SearchAttributeCache(client)
        # Coding agents on Runtime: the CLI template snapshots this worker knows.
        self.cli_templates = CliTemplates()
        # Pause, stop, wake, extend, list: activities of their own (activities.sandbox_lifecycle).
        self.lifecycle = LifecycleActivities(self._provider)
        target = client.service_client.config.target_host if client is not None else None
        self._own_ports = own_loopback_ports(target)

    @classmethod
    def from_env(
        cls,
        client: Client | None,
        grants: Grants | None = None,
        admission: AdmissionSettings | None = None,
        host_queue: str | None = None,
    ) -> SandboxActivities:
        providers, factories = registry.worker_providers()
        return cls(
            client,
            providers=providers,
            factories=factories,
            grants=grants,
            admission=admission,
            host_queue=host_queue,
        )

    @property
    def grants(self) -> Grants:
        return self._grants

    @property
    def admission(self) -> AdmissionSettings:
        return self._admission

    def all(self) -> list[Callable[..., Any]]:
        from activities.notify.activities import NotifyActivities

        return [
            *NotifyActivities(self._client, grants=self._grants).all(),
            *SnapshotActivities(self._provider, self._heartbeat_seconds).all(),
            *DailyLimitActivities(self._provider).all(),
            *KitRequestActivities(self._provider).all(),
            *DoneCheckActivities(self._provider, self._heartbeat_seconds).all(),
            *DoneSandboxActivities(
                self._provider,
                self._heartbeat_seconds,
                grants=self._grants,
                own_ports=self._own_ports,
            ).all(),
            *self.lifecycle.all(),
            *ModelCallActivities(self._provider, self._host_queue).all(),
            *AdmissionActivities(self._client, self._admission).all(),
            *self._host_checks.all(),
            *WorkspaceActivities(self._provider, self._heartbeat_seconds).all(),
            *BranchPushActivities(self._provider, self._heartbeat_seconds).all(),
            *PullRequestActivities().all(),
            *CiActivities().all(),
            self.create_sandbox,
            self.start_agent,
            self.observe_agent,
            self.read_checkpoint,
            self.check_search_attributes,
            self.check_spec,
        ]

    async def aclose(self) -> None:
        providers, self._providers = list(self._providers.values()), {}
        for provider in providers:
            await provider.aclose()

    async def __aenter__(self) -> SandboxActivities:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def host_provider(self) -> SandboxProvider | None:
        """This host's provider, whose sandboxes belong to it (None: this worker has none,
        e.g. a benchmark's)."""
        names = [*self._providers, *self._factories]
        own = next((name for name in names if traits(name).host_bound), None)
        return None if own is None else await self._provider(own)

    async def _provider(self, name: str) -> SandboxProvider:
        provider = self._providers.get(name)
        if provider is not None:
            return provider
        async with self._building:
            if name not in self._providers:
                factory = self._factories.get(name)
                if factory is None:
                    raise non_retryable(ErrorType.INVALID_REQUEST, f"no provider {name!r}")
                with activity_errors():
                    self._providers[name] = factory()
            return self._providers[name]

    # ----- starting agents -----

    @activity.defn(name=ActivityName.CHECK_SPEC)
    async def check_spec(self, input: SpecCheckInput) -> SpecCheck:
        """What in the spec this worker's grants do not allow (a local activity at a run's
        start): a result, not an error, so the run fails once, as `SpecRefused`; and what the
        run must ask its pool for before it makes anything (admission)."""
        found = await asyncio.to_thread(
            spec_refusals, input.spec, self._grants, None, self._own_ports
        )
        # And what it cannot give a coding agent (its CLI not installed here, ...).
        found += await asyncio.to_thread(coding.refusals, input.spec)
        # What only the start looks at: a credential unset here, a model API nothing answers
        # at (later, a create names the first, and the adapter backs off from the second).
        found += unset_secrets(input.spec, self._grants)
        holds_work = await self._holds_work(input.spec.provider)
        if holds_work:
            # A local repo that is none: its clone would fail at every create (a provider of
            # virtual agents clones nothing).
            found += await asyncio.to_thread(repo_refusals, input.spec)
        if not found:
            # Tried from the worker only for a spec it would run: never a host port refused
            # above (activities/base_url_check.py says what else it never tries).
            found += await asyncio.to_thread(base_url_problems, input.spec)
        queue = activity.info().task_queue if activity.in_activity() else None
        terms = queue and terms_for(input.spec, self._admission, queue, self._key)
        found += admission_refusals(input.spec, self._admission)
        # Only a pinned spec's answer says it: a run begun before never meets the field.
        lost_after = host_lost_seconds() if input.spec.hosts else None
        return SpecCheck(
            refusals=found,
            admission=terms or None,
            host_lost_seconds=lost_after,
            holds_work=holds_work,
        )

    async def _holds_work(self, name: str) -> bool:
        """False only for a provider that says its agents are virtual (`holds_no_work`)."""
        provider = self._providers.get(name)
        if provider is None and name in self._factories:
            try:
                provider = await self._provider(name)
            except Exception:
                return True  # the create will say what is wrong with it
        return not getattr(provider, "holds_no_work", False)

    @activity.defn(name=ActivityName.CREATE_SANDBOX)
    async def create_sandbox(self, input: CreateSandboxInput) -> AgentStarted:
        try:
            return await self._create_sandbox(input)
        except Exception as error:
            # A try that failed with another to follow: the run's card says what it waits on.
            await tell_run(self._client, error, "create sandbox", input.attempt)
            raise

    async def _create_sandbox(self, input: CreateSandboxInput) -> AgentStarted:
        spec = input.spec
        # Again here, before anything is made: a run begun before the check, a worker with
        # other grants, or a create scheduled by some other workflow.
        refuse_unless_allowed(spec, self._grants, self._own_ports)
        coding.refuse_unless_runnable(spec)
        env = setup.agent_env(spec, attempt=input.attempt, restart_reason=input.restart_reason)
        env |= coding.adapter_env(spec)
        if spec.agent is None and not Path(spec.agent_dir).expanduser().is_dir():
            raise non_retryable(
                ErrorType.SPEC_UNUSABLE,
                f"field agent_dir: {spec.agent_dir} is not a folder on this worker",
            )
        provider = await self._provider(spec.provider)
        request = replace(
            setup.spec_request(
                spec,
                self._grants,
                name=f"{spec.run_id}-{input.attempt}",
                labels={LABEL_RUN: spec.run_id, LABEL_ATTEMPT: str(input.attempt)},
                max_total_cost_micros=input.max_total_cost_micros,
            ),
            mounts=coding.mounts(spec),
            model=setup.model_access(
                spec,
                host_cap(input.model_allowance_usd, input.model_booked_by_host, self._host_queue),
            ),
        )
        async with auto_heartbeat(self._heartbeat_seconds):
            with activity_errors():
                daily = None
                if not activity.in_activity() or activity.info().attempt == 1:
                    # Only before the first try: a retry may find the sandbox its first try
                    # made, whose own lease is already counted against the limit.
                    what = f"sandbox {input.attempt}'s first lease"
                    daily = await ensure_daily_room(provider, input.lease_cost_micros, what)
                request = await usable_restore(provider, request, input.restore)
                restored = request.snapshot_id is not None
                # Before the sandbox: Runtime gives every sandbox its placeholder.
                await hold_model_key(provider, spec)
                from_template = traits(spec.provider).cli_from_template
                if spec.agent is not None and from_template and not restored:
                    # The CLI comes with the sandbox: a copy of its template snapshot.
                    template = await self.cli_templates.snapshot_for(provider, spec)
                    request = replace(request, snapshot_id=template)
                sandbox, created = await setup.running_sandbox(provider, request)
                sid = sandbox.sandbox_id
                model_env, model_url = await model_wiring(provider, sid, spec)
                env |= model_env
                config = None
                if spec.agent is not None:
                    config = coding.config_bytes(spec, base_url=model_url)
                launch = keyed_launch(spec, _launch(spec, input.attempt, 0, env))
                if restored and input.restore is not None:
                    # Files (and, in memory mode, the agent) come back from the snapshot.
                    process, adopted = await start_restored(
                        provider, sandbox, input.restore, launch
                    )
                    return AgentStarted(
                        sandbox_id=sid,
                        process_id=process.process_id,
                        created=created,
                        lease_ends_at=sandbox.lease_ends_at,
                        isolation=sandbox.isolation,
                        restored_from=request.snapshot_id,
                        adopted=adopted,
                        daily=daily,
                        **self._host_of(input),
                    )
                await setup.clone_and_switch(provider, sid, spec)
                kept = await workspace.put_back(provider, sid, spec, input.workspace)
                if config is None:
                    await provider.upload_dir(sid, spec.agent_dir, AGENT_MOUNT)
                await provider.upload_dir(sid, str(setup.KIT_DIR), KIT_MOUNT)
                if config is not None:  # a coding agent: overnight's adapter runs it
                    await provider.write_file(sid, coding.ADAPTER_CONFIG, config)
                    if not traits(spec.provider).mounts_worker_folders:  # carried in
                        store = coding.session_store(spec.run_id)
                        await sessions.push_sessions(provider, sid, store)
                if input.checkpoint is not None:
                    await setup.write_checkpoint_once(
                        provider, sid, spec.checkpoint_path, input.checkpoint
                    )
                process = await provider.start_agent(sid, launch)
        return AgentStarted(
            sandbox_id=sid,
            process_id=process.process_id,
            created=created,
            lease_ends_at=sandbox.lease_ends_at,
            isolation=sandbox.isolation,
            daily=daily,
            **self._host_of(input),
            **kept,
        )

    def _host_of(self, input: CreateSandboxInput) -> dict[str, Any]:
        """Where a sandbox made here is reached: this host's queue, for a local one."""
        if not input.wants_host or self._host_queue is None or not host_bound(input.spec.provider):
            return {}
        return {"host_queue": self._host_queue, "host_lost_seconds": host_lost_seconds()}

    @activity.defn(name=ActivityName.START_AGENT)
    async def start_agent(self, input: StartAgentInput) -> AgentStarted:
        spec = input.spec
        refuse_unless_allowed(spec, self._grants, self._own_ports)
        coding.refuse_unless_runnable(spec)
        env = setup.agent_env(spec, attempt=input.attempt, restart_reason=input.restart_reason)
        env |= coding.adapter_env(spec)
        provider = await self._provider(spec.provider)
        launch = _launch(
            spec,
            input.attempt,
            input.fresh_start,
            env,
            resumed=input.resumed,
            done_round=input.done_round,
            ci_round=input.ci_round,
        )
        previous = None
        if input.output_of is not None:
            previous = await read_last_words(
                provider, input.sandbox_id, input.output_of, input.secret_env, may_wake=False
            )
        with activity_errors():
            model_env, model_url = await model_wiring(provider, input.sandbox_id, spec)
            launch = keyed_launch(spec, replace(launch, env={**launch.env, **model_env}))
            await hold_model_key(provider, spec)  # again: the worker's key may have changed
            if spec.agent is not None:
                # As the worker means it, whatever the agent did to it meanwhile.
                config = coding.config_bytes(spec, base_url=model_url)
                await provider.write_file(input.sandbox_id, coding.ADAPTER_CONFIG, config)
            if input.told:
                # A failing CI check, told where a done check's failure is (its reason says).
                await provider.write_file(input.sandbox_id, DONE_CHECK_FILE, input.told.encode())
            process = await provider.start_agent(input.sandbox_id, launch)
        return AgentStarted(
            sandbox_id=input.sandbox_id, process_id=process.process_id, previous_output=previous
        )

    # ----- watching -----

    @activity.defn(name=ActivityName.OBSERVE_AGENT)
    async def observe_agent(self, input: ObserveInput) -> Observation:
        """A long poll: back as soon as the agent or its sandbox stops, or the checkpoint
        changes, else after `wait_seconds`."""
        provider = await self._provider(input.provider)
        async with auto_heartbeat(self._heartbeat_seconds):
            with activity_errors():
                # A worker shutting down hands the watch over at once (a retry elsewhere, from
                # the same watch token), rather than after the heartbeat timeout.
                seen = await hand_over_on_shutdown(
                    observe(provider, input, _wait_left(input.wait_seconds)), "the watch"
                )
                if input.session_store_of is not None and seen.checkpoint is not None:
                    await sessions.pull_session(
                        provider,
                        input.sandbox_id,
                        coding.session_store(input.session_store_of),
                        seen.checkpoint.text,
                        seen_running=seen.sandbox_state == "running",
                    )
        if not input.read_money:
            return seen
        money = await read_money(provider, input.sandbox_id, fresh=False)
        return seen.model_copy(update={"money": money})

    @activity.defn(name=ActivityName.READ_CHECKPOINT)
    async def read_checkpoint(self, input: ReadCheckpointInput) -> CheckpointSalvage:
        provider = await self._provider(input.provider)
        with activity_errors():
            if input.wake_paused:
                await settle(provider, input.sandbox_id, provider.wake(input.sandbox_id))
            tail = None
            if input.output_of is not None:
                tail = await read_last_words(
                    provider,
                    input.sandbox_id,
                    input.output_of,
                    input.secret_env,
                    may_wake=input.wake_paused,
                )
            read = await read_checkpoint(
                provider,
                input.sandbox_id,
                input.checkpoint_path,
                input.max_bytes,
                input.known_digest,
                secret_env=input.secret_env,
            )
            if input.session_store_of is not None and read.status == "ok":
                await sessions.pull_session(
                    provider,
                    input.sandbox_id,
                    coding.session_store(input.session_store_of),
                    read.text,
                )
            requests = None
            if input.requests_path is not None:
                requests = await read_requests(
                    provider,
                    input.sandbox_id,
                    input.requests_path,
                    input.known_requests_digest,
                    secret_env=input.secret_env,
                )
        return CheckpointSalvage(**read.model_dump(), output_tail=tail, requests=requests)

    @activity.defn(name=ActivityName.CHECK_SEARCH_ATTRIBUTES)
    async def check_search_attributes(
        self, input: SearchAttributeCheckInput
    ) -> SearchAttributeCheck:
        """Answered from the worker's cache (one server call per worker every few minutes);
        runs call it as a local activity."""
        return SearchAttributeCheck(present=await self._search_attributes.present())


def _launch(
    spec: RunSpec,
    attempt: int,
    fresh_start: int,
    env: dict[str, str],
    *,
    resumed: int = 0,
    done_round: int = 0,
    ci_round: int = 0,
) -> AgentLaunch:
    start_key = f"{spec.run_id}-{attempt}-{fresh_start}" + (f"-p{resumed}" if resumed else "")
    if done_round:
        start_key += f"-d{done_round}"
    if ci_round:
        start_key += f"-c{ci_round}"
    return AgentLaunch(
        start_key=start_key,
        command=coding.adapter_command(spec) if spec.agent is not None else spec.command,
        cwd=spec.cwd,
        env=env,
        exit_marker=exit_marker_path(spec.checkpoint_path, start_key),
    )


def _wait_left(wait_seconds: float) -> float:
    """A retried observe waits only what is left of the window its first attempt was given,
    so a flaky provider cannot stretch the workflow's deadlines (stall, budget)."""
    info = activity.info()
    if info.attempt <= 1:
        return wait_seconds
    elapsed = (datetime.now(UTC) - info.scheduled_time).total_seconds()
    return min(wait_seconds, max(0.0, wait_seconds - elapsed))
