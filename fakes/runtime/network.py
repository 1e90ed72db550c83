"""The network rules routes of the fake Runtime API: `GET` and `PUT /v1/sandboxes/{id}/network`
(the shape and its reading in `network_rules`); a create's `network` is held to the same shape
(`rules.create_problems`) and stored on its record (`routes`).

- Rules are enforced on Runtime's hosts, outside the guest, so neither route is a guest call:
  neither wakes a paused sandbox. A `PUT` replaces the rules whole.
- A stopped sandbox's rules still read back; a `PUT` to it answers 409 `sandbox_stopped` (the
  fake's choice: the docs do not say).
- A deleted or unknown sandbox answers 404 `not_found`.

What the fake cannot do: hold its sandboxes' connections to the rules. They are the local
engine's with the host's network (a cloud sandbox's internet is the loopback here, where the
tests' git servers and model API fakes listen), and Runtime's proxy has no counterpart in
them. What Runtime would answer a connection is told by `FakeRuntime.egress_verdict`, in the
words its proxy uses, and Runtime serves no count of refusals, so neither does the fake.
"""

from __future__ import annotations

import re
import time

from fakes.runtime.http import Request, Response, Route, RouteTable, error_response, json_response
from fakes.runtime.network_rules import NetworkRules, network_problems
from fakes.runtime.routes import SANDBOX, refusal
from fakes.runtime.sandboxes import Record, Sandboxes


def rules_shown(record: Record) -> dict[str, object]:
    return record.network.shown(trial=record.shown.get("funding") == "trial")


class NetworkRoutes:
    def __init__(self, sandboxes: Sandboxes) -> None:
        self.sandboxes = sandboxes

    def routes(self) -> RouteTable:
        path = re.compile(SANDBOX + "/network$")
        return [
            Route("GET", path, "network", self._get),
            Route("PUT", path, "network_set", self._set),
        ]

    async def _get(self, request: Request, groups: list[str]) -> Response:
        record, _ = await self.sandboxes.get(groups[0])
        return json_response(rules_shown(record))

    async def _set(self, request: Request, groups: list[str]) -> Response:
        record, info = await self.sandboxes.get(groups[0])
        body = request.json()
        problems = network_problems(body)
        if problems:
            return refusal(400, "invalid_request", problems)
        if info.state == "stopped":
            return error_response(409, "sandbox_stopped", f"Sandbox {record.id} is stopped.")
        rules = NetworkRules.from_body(body)
        rules.updated_at = time.time()
        with self.sandboxes.lock:
            record.network = rules
        return json_response(rules_shown(record))
