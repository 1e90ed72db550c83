"""The admission workflow's calls (activities/admission/activities.py): asking a pool for a place,
and finding the holders that gave theirs back."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.models import ActivityName
    from activities.models.admission import (
        AdmissionAsk,
        HolderCheck,
        PoolSettingsInput,
        WorkflowIds,
    )
    from overnight.core.admission import AdmissionRequest, AdmissionSettings, AdmissionTerms
    from workflows import policies


async def request_admission(terms: AdmissionTerms, request: AdmissionRequest) -> None:
    """Ask the pool's admission workflow for a place (it answers with the `admitted` signal).
    Safe to repeat: the same holder is counted once."""
    await workflow.execute_activity(
        ActivityName.REQUEST_ADMISSION,
        AdmissionAsk(terms=terms, request=request),
        **policies.ADMISSION.options(),
        summary=f"ask for a place in the pool of {terms.task_queue} (priority {request.priority})",
    )


async def closed_workflows(ids: list[str]) -> list[str]:
    """Which of these workflows are closed (or never were)."""
    found: WorkflowIds = await workflow.execute_activity(
        ActivityName.CLOSED_WORKFLOWS,
        WorkflowIds(ids=ids),
        result_type=WorkflowIds,
        **policies.ADMISSION.options(),
        summary=f"look for closed holders among {len(ids)}",
    )
    return found.ids


async def released_holders(ids: list[str], *, ask: bool) -> WorkflowIds:
    """Which of these holders are out of the pool: closed, no overnight run, or (`ask`) in no
    pool by their own word (their `in_pool` query); and which of them did not answer."""
    found: WorkflowIds = await workflow.execute_activity(
        ActivityName.RELEASED_HOLDERS,
        HolderCheck(ids=ids, ask=ask),
        result_type=WorkflowIds,
        **policies.ADMISSION.options(),
        summary=f"ask {len(ids)} holder(s) whether they gave their place back",
    )
    return found


async def pool_settings() -> AdmissionSettings:
    """The pool's limits and bounds, from the worker running the admission workflow (a local
    activity: its settings, never a signal's)."""
    settings: AdmissionSettings = await workflow.execute_local_activity(
        ActivityName.POOL_SETTINGS,
        PoolSettingsInput(),
        result_type=AdmissionSettings,
        **policies.POOL_SETTINGS.local_options(),
        summary="read this worker's admission settings",
    )
    return settings
