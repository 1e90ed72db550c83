"""Runtime's egress secrets, for the run's model key its sandboxes never hold
(overnight/core/runtime_model_key.py, docs/gateway.md "On Runtime").

Only the documented routes (`withruntime/runtime`, `packages/cloud-guide/docs/security.md`
"Secrets sandboxes never see", `api.md`): `PUT /v1/egress-secrets/{name}` with the value and
its hosts stores or replaces one (a replacement keeps its placeholder, so a retried store
changes nothing a sandbox sees), `DELETE /v1/egress-secrets/{name}` erases it. The store is
the SDK's `runtime.secrets.set` (that PUT alone when no jobs copy is asked for); the delete is
sent on the client's transport, because the SDK's `delete` first lists the jobs copies, a route
the docs do not name. Neither answer is read: the placeholder is the sandbox's business.

An account holds at most 50 secrets for sandboxes: one past that is refused, and so, here, is
the run's start, retried until another run's end frees one (the error says so).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING
from urllib.parse import quote

import withruntime

from activities.providers.protocol import ProviderError
from activities.providers.runtime.errors import runtime_call

# Runtime's code for a limit reached (api.md's table), here the account's 50 secrets.
FULL = "quota_exceeded"


class RuntimeEgressSecrets:
    """Mixed into `RuntimeProvider` (which supplies `_client` and `_budget`): it
    `HoldsEgressSecrets`."""

    _budget: float

    if TYPE_CHECKING:

        def _client(self) -> withruntime.AsyncRuntime: ...

    async def hold_egress_secret(self, name: str, value: str, hosts: Sequence[str]) -> None:
        try:
            async with runtime_call(None, self._budget):
                await self._client().secrets.set(name, value=value, hosts=list(hosts))
        except ProviderError as error:
            cause = error.__cause__
            if isinstance(cause, withruntime.RuntimeError) and cause.code == FULL:
                raise ProviderError(
                    f"Runtime refused egress secret {name}: the account holds as many secrets "
                    "for sandboxes as it may (50); one frees when another run ends",
                    kind="EgressSecretsFull",
                ) from None
            raise

    async def drop_egress_secret(self, name: str) -> bool:
        transport = self._client().secrets._t  # withruntime 0.35's, pinned in pyproject
        try:
            async with runtime_call(None, self._budget):
                await transport.json("DELETE", f"/v1/egress-secrets/{quote(name, safe='')}")
        except ProviderError as error:
            if isinstance(error.__cause__, withruntime.NotFoundError):
                return False
            raise
        return True
