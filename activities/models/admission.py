"""The inputs and results of admission's activities (activities/admission/activities.py), apart from
`activities.models` so that one stays small; the workflow imports them as it does those."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from overnight.core.admission import AdmissionRequest, AdmissionTerms


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AdmissionAsk(_Model):
    """Ask the pool's admission workflow (started if need be) for a place."""

    terms: AdmissionTerms
    request: AdmissionRequest


class WorkflowIds(_Model):
    """Workflow ids: those asked about, or those of them that are closed (or never were);
    `unanswered`: of those asked (`HolderCheck.ask`), the running runs that did not answer."""

    ids: list[str] = Field(default_factory=list)
    unanswered: list[str] = Field(default_factory=list)


class HolderCheck(_Model):
    """Which of these holders are out of the pool: closed (or never were), not an overnight
    run, or (`ask`) saying, asked, that they are in no pool."""

    ids: list[str] = Field(default_factory=list)
    ask: bool = False


class PoolSettingsInput(_Model):
    """Nothing: the worker answers with its own settings."""
