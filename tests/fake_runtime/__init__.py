"""A loopback fake of the Runtime HTTP API, backed by the local sandbox engine.

    with FakeRuntime(lambda: LocalProvider(home)) as fake:
        fake.use(monkeypatch, tmp_path)   # RUNTIME_API_URL, RUNTIME_API_KEY, no proxies
        fake.fail(10, 503, retry_after=0.01)
        ...

It enforces the real API's rules by default (`Rules`; `strict=False` turns them off). See
`FakeRuntime` for the fault injection API, the counters and the lease hook.
"""

from tests.fake_runtime.faults import Fault
from tests.fake_runtime.http import Request
from tests.fake_runtime.rules import Rules
from tests.fake_runtime.server import FakeRuntime
from tests.fake_runtime.traffic import Served

__all__ = ["FakeRuntime", "Fault", "Request", "Rules", "Served"]
