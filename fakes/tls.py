"""Certificate authorities for fakes that speak TLS: made in memory, one leaf per host.

    public = CertAuthority("the public web")                 # stands for the public roots
    with FakeModelApi(script, tls=public.server_context("api.anthropic.com")) as model:
        ...

A leaf names its host as a DNS name, or as an IP address when it is one, and lasts a day.
Keys are EC P-256: quick to make, accepted by OpenSSL, Node and Bun.
"""

from __future__ import annotations

import datetime
import ipaddress
import ssl
import tempfile
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

LIFETIME = datetime.timedelta(days=1)
# Clocks a little behind ours still accept a leaf made just now.
BACKDATE = datetime.timedelta(hours=1)


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _subject_name(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


class CertAuthority:
    """A CA of its own: `pem` is its certificate, `issue(host)` a leaf for `host`."""

    def __init__(self, name: str) -> None:
        self._key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        usage = x509.KeyUsage(
            digital_signature=True,
            key_cert_sign=True,
            crl_sign=True,
            content_commitment=False,
            key_encipherment=False,
            data_encipherment=False,
            key_agreement=False,
            encipher_only=False,
            decipher_only=False,
        )
        public = self._key.public_key()
        self._cert = (
            x509.CertificateBuilder()
            .subject_name(_name(name))
            .issuer_name(_name(name))
            .public_key(public)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - BACKDATE)
            .not_valid_after(now + LIFETIME)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(usage, critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
            .sign(self._key, hashes.SHA256())
        )
        self.pem = self._cert.public_bytes(serialization.Encoding.PEM)
        self._contexts: dict[str, ssl.SSLContext] = {}

    def issue(self, host: str) -> tuple[bytes, bytes]:
        """A leaf certificate for `host` and its key, both PEM."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        leaf = (
            x509.CertificateBuilder()
            .subject_name(_name(host))
            .issuer_name(self._cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - BACKDATE)
            .not_valid_after(now + LIFETIME)
            .add_extension(x509.SubjectAlternativeName([_subject_name(host)]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()),
                critical=False,
            )
            .sign(self._key, hashes.SHA256())
        )
        key_pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        return leaf.public_bytes(serialization.Encoding.PEM), key_pem

    def server_context(self, host: str) -> ssl.SSLContext:
        """A server's TLS context presenting a leaf for `host` (HTTP/1.1 only); one per host."""
        context = self._contexts.get(host)
        if context is None:
            cert, key = self.issue(host)
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.set_alpn_protocols(["http/1.1"])
            # The standard library loads a chain only from files: written, loaded, removed.
            with tempfile.TemporaryDirectory() as folder:
                cert_file, key_file = Path(folder, "cert.pem"), Path(folder, "key.pem")
                cert_file.write_bytes(cert)
                key_file.write_bytes(key)
                context.load_cert_chain(cert_file, key_file)
            self._contexts[host] = context
        return context
