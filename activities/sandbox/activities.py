"""The sandbox activities: thin steps from one model to another, through a provider.

`SandboxActivities` makes, starts and watches agents (its lifecycle's steps are
`activities.sandbox.lifecycle`'s), and holds what every activity group of the worker shares:
the providers (`activities.sandbox.provider_pool`: `local` always, `runtime` built on first use from
the worker's `RUNTIME_API_KEY`), the worker's grants (activities.admission.grants: what a spec may
ask for), which `check_spec` answers at a run's start and the steps that make or start agents
check again, and its settings. `activities.worker_activities` builds the other groups on
them and gives the worker its list. Provider failures become activity errors in one place
(`activities.errors.activity_errors`); long steps heartbeat (`activities.heartbeat`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any

from temporalio import activity
from temporalio.client import Client

from activities.admission.activities import worker_admission, worker_key
from activities.admission.grants import (
    own_loopback_ports,
    refuse_unless_allowed,
    worker_grants,
)
from activities.coding_agent import sessions
from activities.coding_agent import setup as coding
from activities.coding_agent.model_calls import model_wiring
from activities.coding_agent.runtime_model_key import hold_model_key, keyed_launch
from activities.coding_agent.template import CliTemplates
from activities.errors import ErrorType, activity_errors, non_retryable
from activities.heartbeat import auto_heartbeat, hand_over_on_shutdown
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
from activities.providers.money import ensure_daily_room, read_money
from activities.providers.protocol import SandboxProvider
from activities.providers.registry import ProviderFactory
from activities.sandbox import spec_check
from activities.sandbox.agent_launch import agent_launch
from activities.sandbox.last_words import read_last_words
from activities.sandbox.lifecycle import LifecycleActivities, settle
from activities.sandbox.observe import observe
from activities.sandbox.provider_pool import ProviderPool
from activities.sandbox.requests_file import read_requests
from activities.sandbox.retry_notes import tell_run
from activities.sandbox.search_attributes import SearchAttributeCache
from activities.sandbox.snapshots import start_restored, usable_restore
from activities.sandbox_base import setup
from activities.sandbox_base.checkpoints import read_checkpoint
from activities.workspace import activities as workspace
from overnight.core.admission import AdmissionSettings
from overnight.core.constants import (
    AGENT_MOUNT,
    KIT_MOUNT,
    LABEL_ATTEMPT,
    LABEL_RUN,
)
from overnight.core.done_check import DONE_CHECK_FILE
from overnight.core.grants import Grants
from overnight.core.host_settings import host_lost_seconds
from overnight.core.hosts import host_bound
from overnight.core.model_access import host_cap
from overnight.core.provider_traits import traits


class SandboxActivities:
    """The sandbox's activities, registered under `ActivityName` names (`own()`, and
    `lifecycle.all()`), and what every group shares: `providers`, `grants`, the settings."""

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
        once (overnight/core/admission.py); without them, the worker's environment says.
        `host_queue`: this host's own task queue (overnight.core.hosts), which the local sandboxes
        made here name as theirs (None: they name none, and any worker is sent their steps)."""
        self.client = client
        self.host_queue = host_queue
        self.heartbeat_seconds = heartbeat_seconds
        self.providers = ProviderPool(providers, factories)
        self._grants = worker_grants() if grants is None else grants
        self._admission = worker_admission() if admission is None else admission
        self._key = worker_key()
        self._search_attributes = SearchAttributeCache(client)
        # Coding agents on Runtime: the CLI template snapshots this worker knows.
        self.cli_templates = CliTemplates()
        # Pause, stop, wake, extend, list: activities of their own (activities.sandbox.lifecycle).
        self.lifecycle = LifecycleActivities(self.providers.get)
        target = client.service_client.config.target_host if client is not None else None
        # The worker's own loopback ports (its server, metrics...), which no spec may reach.
        self.own_ports = own_loopback_ports(target)

    @property
    def grants(self) -> Grants:
        return self._grants

    @property
    def admission(self) -> AdmissionSettings:
        return self._admission

    def own(self) -> list[Callable[..., Any]]:
        """The sandbox's own activities, but for its lifecycle's (`lifecycle.all()`); the
        worker registers them with every other group's (`activities.worker_activities`)."""
        return [
            self.create_sandbox,
            self.start_agent,
            self.observe_agent,
            self.read_checkpoint,
            self.check_search_attributes,
            self.check_spec,
        ]

    async def aclose(self) -> None:
        await self.providers.aclose()

    async def __aenter__(self) -> SandboxActivities:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # ----- starting agents -----

    @activity.defn(name=ActivityName.CHECK_SPEC)
    async def check_spec(self, input: SpecCheckInput) -> SpecCheck:
        """What in the spec this worker will not or cannot do, and what the run must ask its
        pool for (`activities.sandbox.spec_check`)."""
        spec = input.spec
        holds_work = await self.providers.holds_work(spec.provider)
        return await spec_check.check_spec(
            spec, self._grants, self.own_ports, self._admission, self._key, holds_work
        )

    @activity.defn(name=ActivityName.CREATE_SANDBOX)
    async def create_sandbox(self, input: CreateSandboxInput) -> AgentStarted:
        try:
            return await self._create_sandbox(input)
        except Exception as error:
            # A try that failed with another to follow: the run's card says what it waits on.
            await tell_run(self.client, error, "create sandbox", input.attempt)
            raise

    async def _create_sandbox(self, input: CreateSandboxInput) -> AgentStarted:
        spec = input.spec
        # Again here, before anything is made: a run begun before the check, a worker with
        # other grants, or a create scheduled by some other workflow.
        refuse_unless_allowed(spec, self._grants, self.own_ports)
        cli = coding.spec_cli(spec)  # looked up once, for every step below that needs it
        coding.refuse_unless_runnable(spec, cli)
        env = setup.agent_env(spec, attempt=input.attempt, restart_reason=input.restart_reason)
        env |= coding.adapter_env(spec, cli)
        if spec.agent is None and not Path(spec.agent_dir).expanduser().is_dir():
            raise non_retryable(
                ErrorType.SPEC_UNUSABLE,
                f"field agent_dir: {spec.agent_dir} is not a folder on this worker",
            )
        provider = await self.providers.get(spec.provider)
        request = replace(
            setup.spec_request(
                spec,
                self._grants,
                name=f"{spec.run_id}-{input.attempt}",
                labels={LABEL_RUN: spec.run_id, LABEL_ATTEMPT: str(input.attempt)},
                max_total_cost_micros=input.max_total_cost_micros,
            ),
            mounts=coding.mounts(spec, cli=cli),
            model=setup.model_access(
                spec,
                host_cap(input.model_allowance_usd, input.model_booked_by_host, self.host_queue),
            ),
        )
        async with auto_heartbeat(self.heartbeat_seconds):
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
                    template = await self.cli_templates.snapshot_for(provider, spec, cli)
                    request = replace(request, snapshot_id=template)
                sandbox, created = await setup.running_sandbox(provider, request)
                sid = sandbox.sandbox_id
                model_env, model_url = await model_wiring(provider, sid, spec)
                env |= model_env
                config = None
                if spec.agent is not None:
                    config = coding.config_bytes(spec, base_url=model_url, cli=cli)
                launch = keyed_launch(spec, agent_launch(spec, input.attempt, 0, env))
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
        if not input.wants_host or self.host_queue is None or not host_bound(input.spec.provider):
            return {}
        return {"host_queue": self.host_queue, "host_lost_seconds": host_lost_seconds()}

    @activity.defn(name=ActivityName.START_AGENT)
    async def start_agent(self, input: StartAgentInput) -> AgentStarted:
        spec = input.spec
        refuse_unless_allowed(spec, self._grants, self.own_ports)
        cli = coding.spec_cli(spec)  # looked up once, as at a create
        coding.refuse_unless_runnable(spec, cli)
        env = setup.agent_env(spec, attempt=input.attempt, restart_reason=input.restart_reason)
        env |= coding.adapter_env(spec, cli)
        provider = await self.providers.get(spec.provider)
        launch = agent_launch(
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
                config = coding.config_bytes(spec, base_url=model_url, cli=cli)
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
        provider = await self.providers.get(input.provider)
        async with auto_heartbeat(self.heartbeat_seconds):
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
        provider = await self.providers.get(input.provider)
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


def _wait_left(wait_seconds: float) -> float:
    """A retried observe waits only what is left of the window its first attempt was given,
    so a flaky provider cannot stretch the workflow's deadlines (stall, budget)."""
    info = activity.info()
    if info.attempt <= 1:
        return wait_seconds
    elapsed = (datetime.now(UTC) - info.scheduled_time).total_seconds()
    return min(wait_seconds, max(0.0, wait_seconds - elapsed))
