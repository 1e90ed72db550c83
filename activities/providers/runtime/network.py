"""A run's allow-list (`SandboxRequest.egress`) as a Runtime sandbox's network rules.

What Runtime's docs say, and so what this module relies on (`withruntime/runtime`,
`packages/cloud-guide/docs/`: `sandbox-environment.md` "The network", `security.md` "Network
access", `api.md`):
- Every outbound connection of a sandbox goes through a proxy on its host, root and raw
  sockets included, and private, internal, link-local and cloud metadata addresses are refused
  to every sandbox whatever its rules. Overnight has nothing to add for those.
- Each sandbox has rules of its own, set at create (the `network` field) or with
  `PUT /v1/sandboxes/{id}/network` (the SDK's `sandbox.network.set`), applied at once, open
  connections too: `{"internet": bool, "allow": [...], "deny": [...], "connect": [...]}`.
  `allow` narrows the sandbox to domains, `*.domain` (every name under it, not the domain
  itself: overnight's own reading of `*.`), addresses or CIDR ranges; `{"internet": true}`
  alone is the public web; `{"internet": false}` refuses every connection.
- A create that meets a sandbox holding the name (`getOrCreate`) answers it as it is: "the
  other fields apply only when it creates one". A sandbox made from a snapshot takes only its
  own `env`; the docs say nothing of its rules, so they are sent on every create.
- Runtime reports a refused connection only inside the sandbox, in the answer its proxy gives
  the program (`X-Runtime-Egress: rule-not-allowed`, `internet-off`): no route of its API
  counts or lists them (the account's notices, `GET /v1/notices`, tell only of a sandbox
  paused for abuse-like traffic). So `egress_refusals` has nothing to read, and says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from overnight.core.egress import OPEN


def network_rules(egress: Sequence[str] | None) -> dict[str, Any] | None:
    """The rules that let a sandbox reach `egress` and nothing else: `("*",)` the public web,
    `()` nothing; None (a request that names no allow-list) sends no rules, leaving Runtime's
    default (the public web)."""
    if egress is None:
        return None
    if OPEN in egress:
        return {"internet": True}
    if not egress:
        return {"internet": False}
    return {"internet": True, "allow": list(dict.fromkeys(egress))}


class RuntimeNetwork:
    """Mixed into `RuntimeProvider`: what its sandboxes' network refused."""

    async def egress_refusals(self, sandbox_id: str) -> dict[str, int]:
        """Always empty, and without a request: Runtime counts no refusals its API serves (its
        proxy tells only the program refused; see the module's docstring)."""
        return {}
