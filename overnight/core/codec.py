"""Payload encryption: AES-256-GCM on every payload overnight writes, keys from the environment.

`OVERNIGHT_CODEC_KEYS` holds `id:base64-of-32-bytes` entries, comma-separated. The first key
encrypts; every key decrypts, so a key is rotated without downtime: put the new one first
(`new:...,old:...`), roll workers and clients, and drop the old one once no open run's
history needs it. Unset (or empty), nothing is encrypted: `data_converter()` is then
`pydantic_data_converter` itself.

An encrypted payload's metadata names its encoding (`binary/encrypted`) and the id of the key
that encrypted it (`encryption-key-id`), never the key; its data is a 12-byte nonce followed
by the AES-GCM ciphertext and tag of the whole original payload (metadata included), with the
key id as associated data, so a payload moved under another id does not decrypt.

With the codec on, failure messages and stack traces are encrypted too (Temporal's encoded
failure attributes). Search attributes, workflow ids and types, task queues, timer durations
and event types are not payloads and stay readable by design (docs/encryption.md).
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import os
import re
from collections.abc import Mapping, Sequence

from temporalio.api.common.v1 import Payload
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import (
    DataConverter,
    DefaultFailureConverterWithEncodedAttributes,
    PayloadCodec,
)

CODEC_KEYS_ENV = "OVERNIGHT_CODEC_KEYS"
ENCODING = b"binary/encrypted"
KEY_ID_METADATA = "encryption-key-id"
NONCE_BYTES = 12
TAG_BYTES = 16
KEY_BYTES = 32
_KEY_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


class CodecConfigError(ValueError):
    """`OVERNIGHT_CODEC_KEYS` is malformed; refused at start, in one line naming no key."""

    bad_input = True


class CodecKeyError(Exception):
    """A payload that cannot be decrypted here: its key id is not configured, or the key under
    that id is not the one that encrypted it. Names the key id, never a key."""

    bad_input = False


@dataclasses.dataclass(frozen=True)
class CodecKey:
    key_id: str
    secret: bytes = dataclasses.field(repr=False)


class Keyring:
    """The configured keys in order: the first writes, all read. Its repr names only ids."""

    def __init__(self, keys: Sequence[CodecKey]) -> None:
        if not keys:
            raise CodecConfigError(f"{CODEC_KEYS_ENV}: no keys")
        # Imported here, not at the top: workflow modules import this one (through connect), and
        # Temporal's workflow sandbox re-imports a module's imports per run, which a compiled
        # extension such as cryptography's cannot survive (a SystemError at worker start).
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        self._keys = {key.key_id: key for key in keys}
        self._ciphers = {key.key_id: AESGCM(key.secret) for key in keys}
        self.writer = keys[0].key_id

    @property
    def ids(self) -> list[str]:
        return list(self._keys)

    def __repr__(self) -> str:
        return f"Keyring(ids={self.ids!r}, writer={self.writer!r})"

    def encrypt(self, payload: Payload) -> Payload:
        nonce = os.urandom(NONCE_BYTES)
        key_id = self.writer.encode()
        sealed = self._ciphers[self.writer].encrypt(nonce, payload.SerializeToString(), key_id)
        return Payload(
            metadata={"encoding": ENCODING, KEY_ID_METADATA: key_id}, data=nonce + sealed
        )

    def decrypt(self, payload: Payload) -> Payload:
        """The original of an encrypted payload; any other payload unchanged."""
        if payload.metadata.get("encoding") != ENCODING:
            return payload
        key_id = payload.metadata.get(KEY_ID_METADATA, b"").decode("utf-8", "replace")
        cipher = self._ciphers.get(key_id)
        if cipher is None:
            raise CodecKeyError(
                f"a payload is encrypted with key id {key_id!r}, which {CODEC_KEYS_ENV} does "
                f"not hold (it holds {', '.join(map(repr, self.ids))})"
            )
        from cryptography.exceptions import InvalidTag

        data = payload.data
        try:
            if len(data) < NONCE_BYTES + TAG_BYTES:
                raise InvalidTag
            plain = cipher.decrypt(data[:NONCE_BYTES], data[NONCE_BYTES:], key_id.encode())
        except InvalidTag:
            raise CodecKeyError(
                f"a payload under key id {key_id!r} does not decrypt with the key "
                f"{CODEC_KEYS_ENV} gives that id (another key, or the payload was altered)"
            ) from None
        return Payload.FromString(plain)


def parse_keys(text: str) -> Keyring:
    """`id:base64,...` as a keyring; a malformed entry is a `CodecConfigError` naming the
    entry by its position and id, never by its key."""
    keys: list[CodecKey] = []
    for number, entry in enumerate(text.split(","), start=1):
        entry = entry.strip()
        where = f"{CODEC_KEYS_ENV}: entry {number}"
        if not entry:
            raise CodecConfigError(f"{where} is empty (a stray comma?)")
        key_id, sep, encoded = entry.partition(":")
        key_id = key_id.strip()
        if not sep:
            raise CodecConfigError(f"{where} is not id:base64-of-32-bytes")
        if not _KEY_ID.match(key_id):
            raise CodecConfigError(
                f"{where}: the key id must be 1-64 letters, digits, '.', '_' or '-'"
            )
        try:
            secret = base64.b64decode(encoded.strip(), validate=True)
        except (binascii.Error, ValueError):
            raise CodecConfigError(
                f"{where} (id {key_id!r}): the key is not valid base64"
            ) from None
        if len(secret) != KEY_BYTES:
            raise CodecConfigError(
                f"{where} (id {key_id!r}): the key is {len(secret)} bytes; AES-256 needs "
                f"{KEY_BYTES} (e.g. `head -c 32 /dev/urandom | base64`)"
            )
        if any(key.key_id == key_id for key in keys):
            raise CodecConfigError(f"{CODEC_KEYS_ENV}: key id {key_id!r} is given twice")
        keys.append(CodecKey(key_id, secret))
    return Keyring(keys)


def keyring_from_env(environ: Mapping[str, str] | None = None) -> Keyring | None:
    """The keyring `OVERNIGHT_CODEC_KEYS` configures, or None when it is unset or blank."""
    text = (os.environ if environ is None else environ).get(CODEC_KEYS_ENV, "")
    return parse_keys(text) if text.strip() else None


class EncryptionCodec(PayloadCodec):
    """Temporal's payload codec over a `Keyring`."""

    def __init__(self, keyring: Keyring) -> None:
        self.keyring = keyring

    def __repr__(self) -> str:
        return f"EncryptionCodec({self.keyring!r})"

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self.keyring.encrypt(payload) for payload in payloads]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self.keyring.decrypt(payload) for payload in payloads]


def data_converter(keyring: Keyring | None = None, *, from_env: bool = True) -> DataConverter:
    """overnight's data converter: pydantic payloads, encrypted when a keyring is given or
    (`from_env`) configured in the environment. A bad configuration raises
    `CodecConfigError`."""
    if keyring is None and from_env:
        keyring = keyring_from_env()
    if keyring is None:
        return pydantic_data_converter
    return dataclasses.replace(
        pydantic_data_converter,
        payload_codec=EncryptionCodec(keyring),
        failure_converter_class=DefaultFailureConverterWithEncodedAttributes,
    )


def encrypts(converter: DataConverter) -> bool:
    """Whether `converter` encrypts payloads (so plaintext fields must not repeat them)."""
    return isinstance(converter.payload_codec, EncryptionCodec)


def describe(converter: DataConverter) -> str:
    """One line for a log: whether payloads are encrypted, and with which key ids."""
    codec = converter.payload_codec
    if isinstance(codec, EncryptionCodec):
        ids = codec.keyring.ids
        return f"payloads encrypted (AES-256-GCM) with key {ids[0]!r}; readable keys: {ids}"
    return f"payloads not encrypted ({CODEC_KEYS_ENV} unset)"
