"""What the fake's sandboxes get of Runtime's network: its proxy's variables, its certificate,
and each egress secret's placeholder (`fakes/runtime/egress_proxy.py` says what the proxy
does, `fakes/runtime/egress_secrets.py` what a secret is).

Runtime's image sets the proxy variables and trusts Runtime's certificate through
`SSL_CERT_FILE`, `REQUESTS_CA_BUNDLE` and `NODE_EXTRA_CA_CERTS`
(`/usr/local/share/ca-certificates/runtime-egress.crt`). The fake's sandboxes see the host's
system folders read-only, so the certificate files are the fake's own folder, shown read-only
at `CERT_FOLDER` in every sandbox, and every command and process of a sandbox starts with
these variables under its own `env` (Runtime: "A command's own `env` is put over them").

The trust is the system's roots, the fake's egress CA, and whatever CA a test adds for its
servers (`trust`): they stand for the public roots, which both Runtime's proxy and its
sandboxes trust. `reach(name, port)` says where a name is served (the sandboxes' internet is
the loopback): the proxy connects there for that name, on any port asked.
"""

from __future__ import annotations

import os
import shutil
import ssl
import tempfile
from pathlib import Path

from activities.providers.protocol import WorkerMount
from fakes.runtime.egress_proxy import EgressProxy, proxy_env
from fakes.runtime.egress_secrets import EgressSecrets
from fakes.tls import CertAuthority

CERT_FOLDER = "/overnight/runtime-egress"
RUNTIME_CERT = "runtime-egress.crt"
EXTRA = "extra-ca-certs.pem"  # the egress CA and the test's CAs: NODE_EXTRA_CA_CERTS
BUNDLE = "ca-certificates.crt"  # and the system's roots: SSL_CERT_FILE, REQUESTS_CA_BUNDLE
SYSTEM_BUNDLES = ("/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt")


def system_roots() -> bytes:
    found = ssl.get_default_verify_paths()
    for path in (found.cafile, found.openssl_cafile, *SYSTEM_BUNDLES):
        if path and os.path.isfile(path):
            return Path(path).read_bytes()
    return b""


class GuestNetwork:
    """The egress side of one fake account: its secrets, its proxy, its certificate files."""

    def __init__(self, internet: dict[str, tuple[str, int]] | None = None) -> None:
        self.secrets = EgressSecrets()
        self.authority = CertAuthority("fake Runtime egress")
        self.internet: dict[str, tuple[str, int]] = dict(internet or {})
        self._trusted: list[bytes] = []
        self._context: ssl.SSLContext | None = None
        self.folder = Path(tempfile.mkdtemp(prefix="fake-runtime-egress-"))
        self.folder.chmod(0o755)  # a root worker's sandboxes run as a user of their own
        self._write()
        self.proxy = EgressProxy(self.secrets, self.authority, self.internet, self.context)

    def reach(self, name: str, port: int, address: str = "127.0.0.1") -> None:
        """Connections to `name` (any port) go to `address:port` from now on."""
        self.internet[name.lower()] = (address, port)

    def trust(self, ca_pem: bytes) -> None:
        """A CA the proxy and the sandboxes trust from now on, as they trust public roots."""
        self._trusted.append(ca_pem)
        self._context = None
        self._write()

    def context(self) -> ssl.SSLContext:
        """How the proxy checks an upstream's certificate."""
        if self._context is None:
            context = ssl.create_default_context()
            for pem in self._trusted:
                context.load_verify_locations(cadata=pem.decode())
            context.set_alpn_protocols(["http/1.1"])
            self._context = context
        return self._context

    def env(self) -> dict[str, str]:
        """What every process of every sandbox starts with, under its own `env`."""
        certs = {
            "SSL_CERT_FILE": f"{CERT_FOLDER}/{BUNDLE}",
            "REQUESTS_CA_BUNDLE": f"{CERT_FOLDER}/{BUNDLE}",
            "NODE_EXTRA_CA_CERTS": f"{CERT_FOLDER}/{EXTRA}",
        }
        return proxy_env(self.proxy.port) | certs | self.secrets.guest_env()

    def mounts(self) -> tuple[WorkerMount, ...]:
        return (WorkerMount(source=str(self.folder), target=CERT_FOLDER),)

    async def start(self) -> None:
        await self.proxy.start()

    async def close(self) -> None:
        await self.proxy.close()
        shutil.rmtree(self.folder, ignore_errors=True)

    def _write(self) -> None:
        extra = b"".join([self.authority.pem, *self._trusted])
        for name, data in (
            (RUNTIME_CERT, self.authority.pem),
            (EXTRA, extra),
            (BUNDLE, system_roots() + b"\n" + extra),
        ):
            path = self.folder / name
            tmp = path.with_suffix(".tmp")
            tmp.write_bytes(data)
            tmp.chmod(0o644)
            os.replace(tmp, path)
