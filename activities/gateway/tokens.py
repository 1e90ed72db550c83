"""The tokens that tell the gateway which sandbox asks: an HMAC of the sandbox's name under a
key of this host's, so any worker process of the host checks one without a table, across
restarts. A token names its sandbox (run and attempt) and nothing else: it is void once the
sandbox stops, since the gateway serves only running sandboxes."""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

KEY_FILE = "key"
# 128 bits of HMAC-SHA256: the token's strength.
TOKEN_HEX = 32
PROXY_USER_PREFIX = "sandbox-"


def host_key(folder: Path) -> bytes:
    """This host's key (made once, readable by the worker's user only)."""
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = folder / KEY_FILE
    try:
        return path.read_bytes()
    except FileNotFoundError:
        pass
    key = secrets.token_bytes(32)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another worker of this host made it first
        return path.read_bytes()
    with os.fdopen(fd, "wb") as handle:
        handle.write(key)
    return key


def token_for(key: bytes, sandbox: str) -> str:
    return hmac.new(key, sandbox.encode(), hashlib.sha256).hexdigest()[:TOKEN_HEX]


def verify(key: bytes, sandbox: str, token: str) -> bool:
    return hmac.compare_digest(token_for(key, sandbox), token)
