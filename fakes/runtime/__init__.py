"""A loopback fake of the Runtime HTTP API, backed by the local sandbox engine.

    with FakeRuntime(lambda: LocalProvider(home)) as fake:
        fake.use(monkeypatch, tmp_path)   # RUNTIME_API_URL, RUNTIME_API_KEY, no proxies
        fake.fail(10, 503, retry_after=0.01)
        ...

It enforces the real API's rules by default (`Rules`; `strict=False` turns them off). See
`FakeRuntime` for the fault injection API, the counters and the lease hook, and `money` for
its model of billing (`GET /v1/usage`, `GET /v1/limits`, the daily limit's 402s).

What it does not model: Runtime's real price list (a sandbox costs its vCPUs and memory
while it runs, at the fake's `Prices`: no CPU floor or active-CPU pricing, no paused storage,
snapshot, disk or volume charges), outbound traffic (nothing is sent or charged), persistent
sandboxes' lease renewals, `maxCostMicros`/`maxTotalCostMicros` refusals, the network rules'
hold on connections (they are stored, read back and judged by `egress_verdict`, but its
sandboxes share the host's network: see `network`), the trial's
figures (only "used up"), quotas (`quota_exceeded`), and time passing on its own (a test
moves lease ends with `end_lease_in`, and reopens the daily window itself).
"""

from fakes.runtime.faults import Fault
from fakes.runtime.http import Request
from fakes.runtime.money import Prices
from fakes.runtime.rules import Rules
from fakes.runtime.server import FakeRuntime
from fakes.runtime.traffic import Served

__all__ = ["FakeRuntime", "Fault", "Prices", "Request", "Rules", "Served"]
