"""The tokens that tell the gateway which sandbox asks: an HMAC of the sandbox's name under a
key of this host's, so any worker process of the host checks one without a table, across
restarts. A token names its sandbox (run and attempt) and nothing else: it is void once the
sandbox stops, since the gateway serves only running sandboxes."""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import tempfile
from pathlib import Path

KEY_FILE = "key"
# 128 bits of HMAC-SHA256: the token's strength.
TOKEN_HEX = 32
PROXY_USER_PREFIX = "sandbox-"


def host_key(folder: Path) -> bytes:
    """This host's key (made once, readable by the worker's user only). Written whole to a file
    of its own, then linked into place: the key file appears with its 32 bytes or not at all,
    so a worker starting beside the one that makes it never reads it empty or half written
    (and holds a key of its own the others' tokens fail)."""
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = folder / KEY_FILE
    try:
        return path.read_bytes()
    except FileNotFoundError:
        pass
    fd, made = tempfile.mkstemp(prefix=f".{KEY_FILE}.", dir=folder)  # mode 0600
    try:
        key = secrets.token_bytes(32)
        with os.fdopen(fd, "wb") as handle:
            handle.write(key)
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(made, path)
        except FileExistsError:  # another worker of this host made it first: theirs, whole
            return path.read_bytes()
        return key
    finally:
        os.unlink(made)


def token_for(key: bytes, sandbox: str) -> str:
    return hmac.new(key, sandbox.encode(), hashlib.sha256).hexdigest()[:TOKEN_HEX]


def verify(key: bytes, sandbox: str, token: str) -> bool:
    return hmac.compare_digest(token_for(key, sandbox), token)


# A sandbox's model token: what its coding agent or kit agent sends as either vendor's API
# key to the gateway's model routes (model_routes.py). It names its sandbox, so the gateway
# needs no table; its HMAC is under the same host key with a label of its own, so a proxy
# token never passes for a model token, nor the other way round.
MODEL_TOKEN_PREFIX = "ovn-"
_MODEL_LABEL = b"model-token:"


def model_token_for(key: bytes, sandbox: str) -> str:
    mac = hmac.new(key, _MODEL_LABEL + sandbox.encode(), hashlib.sha256).hexdigest()
    return f"{MODEL_TOKEN_PREFIX}{sandbox}-{mac[:TOKEN_HEX]}"


def model_token_owner(key: bytes, token: str) -> str | None:
    """The sandbox a valid model token names; None for any other string."""
    if not token.startswith(MODEL_TOKEN_PREFIX):
        return None
    sandbox, _, mac = token[len(MODEL_TOKEN_PREFIX) :].rpartition("-")
    if not sandbox or len(mac) != TOKEN_HEX:
        return None
    return sandbox if hmac.compare_digest(model_token_for(key, sandbox), token) else None
