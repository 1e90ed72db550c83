"""A loopback fake of the Runtime HTTP API, backed by the local sandbox engine.

    with FakeRuntime(lambda: LocalProvider(home)) as fake:
        fake.use(monkeypatch, tmp_path)   # RUNTIME_API_URL, RUNTIME_API_KEY, no proxies
        fake.fail(10, 503, retry_after=0.01)
        ...

See `FakeRuntime` for the fault injection API and `requests()` for what it received.
"""

from tests.fake_runtime.faults import Fault
from tests.fake_runtime.http import Request
from tests.fake_runtime.server import FakeRuntime

__all__ = ["FakeRuntime", "Fault", "Request"]
