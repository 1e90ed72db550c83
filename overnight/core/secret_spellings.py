"""The spellings of a secret that redaction looks for besides the value as written. Pure.

An agent that prints or saves a secret by accident seldom writes it only as it is: it lands in
an `Authorization: Basic` header (base64), a URL's query (percent-encoded), a hex dump. So a
secret of `MIN_SPELLED_BYTES` or more is also found as:

- **base64** of its UTF-8 bytes, in the standard and the URL-safe alphabets, padded or not,
  and embedded in the base64 of a longer text: each of the three alignments of its bytes in
  that text has a run of base64 characters that depends on the secret's bits alone (the
  characters at its two ends mix in the neighbours' bits, and are not part of the run). That
  run is what is looked for, so at most a character or two at each end (under 12 bits) stay;
- **hex** of its UTF-8 bytes, lower or upper case (one case throughout);
- **percent-encoded** (a URL's path or query, a form): any of its characters other than ASCII
  letters and digits as itself or as `%XX` of its UTF-8 bytes, in either case, and a space as
  `+` too.

What it cannot find is said in docs/security.md: a secret reversed, cased otherwise, split,
encrypted, compressed, or transformed in any way the agent chooses. Redaction is a safety net
for accidents, not a barrier against a hostile agent that holds the secret.
"""

from __future__ import annotations

import base64
import re

# Shorter secrets are looked for as written only: their spellings would be a few characters
# that base64 or hex text holds by chance.
MIN_SPELLED_BYTES = 8
_URL_SAFE = str.maketrans("+/", "-_")


def literal_spellings(secret: str) -> set[str]:
    """The base64 runs (three alignments, two alphabets) and hex of `secret`, besides itself."""
    data = secret.encode()
    if len(data) < MIN_SPELLED_BYTES:
        return set()
    found = {data.hex(), data.hex().upper()}
    for before in range(3):
        encoded = base64.b64encode(b"\0" * before + data).decode()
        # Base64 character i holds bits 6i..6i+5: those of the secret alone run from the first
        # character past the `before` bytes' bits to the last before the bytes that follow.
        run = encoded[-(-8 * before // 6) : 8 * (before + len(data)) // 6]
        found.update((run, run.translate(_URL_SAFE)))
    found.discard(secret)
    return found


def percent_pattern(secret: str) -> str | None:
    """A regular expression for `secret` percent-encoded in any way (None: nothing in it is
    ever encoded, or it is too short to look for in other spellings). It matches the secret as
    written too."""
    if len(secret.encode()) < MIN_SPELLED_BYTES:
        return None
    parts: list[str] = []
    encoded_any = False
    for char in secret:
        if char.isascii() and char.isalnum():
            parts.append(char)
            continue
        encoded_any = True
        ways = [re.escape(char), "".join(f"%{_either_case(byte)}" for byte in char.encode())]
        if char == " ":
            ways.append(r"\+")
        parts.append(f"(?:{'|'.join(ways)})")
    return "".join(parts) if encoded_any else None


def longest_spelling_chars(secret: str) -> int:
    """How long the longest spelling of `secret` may be (percent-encoding: 3 per byte)."""
    data = secret.encode()
    if len(data) < MIN_SPELLED_BYTES:
        return len(data)
    return 3 * len(data) if percent_pattern(secret) else 2 * len(data)


def _either_case(byte: int) -> str:
    return "".join(f"[{d.lower()}{d}]" if d.isalpha() else d for d in f"{byte:02X}")
