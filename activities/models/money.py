"""The models of money (activities.sandbox.daily_limit, activities/sandbox/observe.py, a sandbox's
end): what a sandbox was charged, the key's daily spending limit, and what a host's gateway booked
to a run's model calls. Apart from `activities.models` so that one stays small; it re-exports
them."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from overnight.core.models import Provider


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SandboxCharge(_Model):
    """What the provider charged for one sandbox so far (Runtime's `GET /v1/usage`), money in
    integer microdollars: settled charges, and money held against its lease not yet settled."""

    sandbox_id: str
    charged_micros: int = 0
    held_micros: int = 0
    running_seconds: float = 0


class DailyLimitRead(_Model):
    """The key's daily spending limit (Runtime's `GET /v1/limits`), in microdollars over the
    last 24 hours; `limit_micros` None: no limit set."""

    limit_micros: int | None = None
    used_micros: int = 0
    remaining_micros: int | None = None


class MoneyRead(_Model):
    """A look at what a sandbox cost and what the key may still spend (best effort: either
    part is None when the provider cannot tell, or the read failed)."""

    charge: SandboxCharge | None = None
    daily: DailyLimitRead | None = None
    # The provider keeps no account (local sandboxes): spend stays an estimate.
    keeps_account: bool = True


class ReadDailyLimitInput(_Model):
    provider: Provider


class GatewayBooks(_Model):
    """What a host's gateway booked to a run's model calls (activities/gateway/model_ledger.py):
    its figure of the run's model spend, and what the status says of the model API."""

    usd: float = Field(default=0, ge=0)
    answers: int = Field(default=0, ge=0)
    # Upstream errors retried at the gateway, the last one and when (epoch seconds).
    retries: int = Field(default=0, ge=0)
    last_upstream_error: str = ""
    last_upstream_error_at: float | None = None
    # Requests refused at the cap, and how many in a row carried the same body (its SHA-256).
    cap_refusals: int = Field(default=0, ge=0)
    repeats: int = Field(default=0, ge=0)
    last_body: str = ""

    def news_beside(self, known: GatewayBooks | None) -> bool:
        """Whether these books are news to a run that knows `known`: a look comes back early
        for them (activities/sandbox/observe.py), and the run looks again at once."""
        return known is None or (self.usd, self.cap_refusals) != (known.usd, known.cap_refusals)
