"""`npm install` in a sandbox behind the gateway, against a registry the test serves on
loopback (npm's registry protocol: a package's document, then its tarball): an allowed
registry name installs through the proxy, a name off the allow-list fails at once and says
why. The sandbox's npm is the machine's own, seen read-only as every system folder is."""

from __future__ import annotations

import contextlib
import hashlib
import http.server
import io
import json
import shutil
import tarfile
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from activities.gateway.resolve import Resolver
from activities.gateway.service import Gateway, refusals_of
from activities.providers.local.engine import LocalEngine
from overnight.core.egress import parse_address_rules

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None or shutil.which("npm") is None,
    reason="needs bubblewrap and npm",
)

PACKAGE = "overnight-tiny"


def tarball() -> bytes:
    """A package's tarball as the registry serves it: `package/` and its files, gzipped."""
    files = {
        "package/package.json": json.dumps({"name": PACKAGE, "version": "1.0.0"}).encode(),
        "package/index.js": b"module.exports = 'tiny';\n",
    }
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w:gz") as archive:
        for name, body in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(body)
            archive.addfile(info, io.BytesIO(body))
    return data.getvalue()


@contextlib.contextmanager
def registry(name: str) -> Iterator[int]:
    """A loopback npm registry serving one package, its tarball's URL at `name`."""
    body = tarball()
    served: dict[str, int] = {"port": 0}

    class Registry(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the standard library's name
            if self.path.rstrip("/") == f"/{PACKAGE}":
                url = f"http://{name}:{served['port']}/{PACKAGE}/-/{PACKAGE}-1.0.0.tgz"
                document = {
                    "name": PACKAGE,
                    "dist-tags": {"latest": "1.0.0"},
                    "versions": {
                        "1.0.0": {
                            "name": PACKAGE,
                            "version": "1.0.0",
                            "dist": {"tarball": url, "shasum": hashlib.sha1(body).hexdigest()},
                        }
                    },
                }
                self._send(json.dumps(document).encode(), "application/json")
            elif self.path.endswith(".tgz"):
                self._send(body, "application/octet-stream")
            else:
                self.send_error(404)

        def _send(self, data: bytes, kind: str) -> None:
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Registry)
    served["port"] = server.server_address[1]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield served["port"]
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[Gateway]:
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 registry.test\n127.0.0.1 evil.test\n")
    # The worker names the loopback registry as reachable, as a company names its mirror.
    served = Gateway(
        tmp_path / "home",
        resolver=Resolver(str(hosts)),
        address_rules=parse_address_rules("127.0.0.1"),
    )
    served.start()
    yield served
    served.stop()


@pytest.fixture
def engine(gateway: Gateway) -> Iterator[LocalEngine]:
    engine = LocalEngine(gateway.home)
    yield engine
    for meta in engine.list_sandboxes():
        engine.stop(meta.id)


def npm_install(engine: LocalEngine, sid: str, name: str, port: int) -> tuple[int, str]:
    script = (
        "mkdir -p /workspace/app && cd /workspace/app && echo '{}' > package.json && "
        f"npm install --no-audit --no-fund --fetch-retries=0 --registry http://{name}:{port}/ "
        f"{PACKAGE} && node -e \"console.log(require('{PACKAGE}'))\""
    )
    done = engine.run(sid, script, timeout_seconds=120)
    return done.exit_code, done.stdout + done.stderr


def test_npm_installs_from_an_allowed_registry_through_the_gateway(engine: LocalEngine) -> None:
    with registry("registry.test") as port:
        sid = f"npm-{uuid.uuid4().hex[:8]}"
        engine.get_or_create(sid, timeout_seconds=180, egress=["registry.test"])
        code, said = npm_install(engine, sid, "registry.test", port)
        assert code == 0 and said.strip().endswith("tiny"), said


def test_npm_fails_at_once_for_a_registry_off_the_allow_list(
    engine: LocalEngine, gateway: Gateway
) -> None:
    with registry("evil.test") as port:
        sid = f"npm-{uuid.uuid4().hex[:8]}"
        engine.get_or_create(sid, timeout_seconds=180, egress=["registry.test"])
        code, said = npm_install(engine, sid, "evil.test", port)
        assert code != 0 and "403" in said, said
    gateway.book.flush()
    assert refusals_of(engine.home, sid).get("evil.test", 0) >= 1
