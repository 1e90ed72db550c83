"""A model call as the gateway forwards it: the request a sandbox sent (`ModelRequest`), the
caller's model token read from it, and the headers and body sent upstream in its place: the
client's, less anything that may carry a credential or choose the worker's account, plus the
worker's own credential in the vendor's header; a streamed Chat Completions request made to
ask for its usage. Also the answer's headers relayed back, and the model a request asked for
(priced when the answer names none): its body's `model`, or the Gemini API's path's.
Pure: model_routes does the I/O.
"""

from __future__ import annotations

import contextlib
import gzip
import json
from collections.abc import Mapping
from dataclasses import dataclass

from activities.gateway.model_usage import Api, ask_for_usage

ANTHROPIC_VERSION = "2023-06-01"
# Request headers never forwarded: hop-by-hop, framing the gateway redoes, and anything that
# may carry a credential (the sandbox's is a model token, not a key; none of its own may
# reach the vendor) or choose the worker's account.
_DROPPED = {"host", "connection", "keep-alive", "proxy-connection", "te", "trailer", "upgrade"}
_DROPPED |= {"transfer-encoding", "content-length", "accept-encoding", "expect", "cookie"}
_DROPPED |= {"openai-organization", "openai-project", "chatgpt-account-id"}
_DROPPED |= {"x-goog-user-project"}  # bills a Google Cloud project of the caller's choice
_KEPT = {"anthropic-version", "anthropic-beta", "idempotency-key"}
_SECRET_WORDS = ("auth", "key", "token", "secret", "cookie", "credential", "password")
_ANSWER_DROPPED = {"connection", "keep-alive", "transfer-encoding", "content-length"}
_ANSWER_DROPPED |= {"set-cookie", "trailer", "upgrade", "proxy-authenticate"}


@dataclass
class ModelRequest:
    """One request on a model route: its API, the vendor's path for it, and what came."""

    api: Api
    vendor_path: str
    query: str
    headers: dict[str, str]  # lower-cased
    body: bytes
    # The model the path names (the Gemini API's); "": the body's.
    model: str = ""
    # False: an answer that uses no tokens (Gemini's countTokens): neither booked nor counted
    # as loop evidence.
    metered: bool = True


# The headers a caller's API key comes in, per vendor: Anthropic's, Google's.
_KEY_HEADERS = ("x-api-key", "x-goog-api-key")


def token_of(headers: Mapping[str, str]) -> str:
    """The caller's model token: `x-api-key` or `x-goog-api-key`, else a bearer
    `Authorization` ("" if none)."""
    for name in _KEY_HEADERS:
        if headers.get(name, "").strip():
            return headers[name].strip()
    scheme, _, value = headers.get("authorization", "").strip().partition(" ")
    return value.strip() if scheme.lower() == "bearer" else ""


def upstream_request(
    request: ModelRequest, credential: str, *, bearer: bool = False
) -> tuple[list[tuple[str, str]], bytes]:
    """The headers and body sent upstream: the client's, less what may carry a credential,
    plus the worker's credential in the vendor's header: `x-api-key` (Messages),
    `x-goog-api-key` (Gemini), `Authorization: Bearer` (OpenAI's); `bearer`: a bearer token
    on the Messages and Gemini routes too (a Claude subscription's, an OAuth token)."""
    headers = request.headers
    body = request.body
    sent = [(k, v) for k, v in headers.items() if _forwarded(k)]
    if request.api == "chat":
        body, sent = _with_usage_asked(body, sent)
    sent.append(("accept-encoding", "identity"))  # the usage is read on the way
    if request.api == "anthropic":
        if "anthropic-version" not in headers:
            sent.append(("anthropic-version", ANTHROPIC_VERSION))
        if credential and not bearer:
            sent.append(("x-api-key", credential))
        elif credential:
            sent.append(("authorization", f"Bearer {credential}"))
    elif request.api == "generate_content" and credential and not bearer:
        sent.append(("x-goog-api-key", credential))
    elif credential:
        sent.append(("authorization", f"Bearer {credential}"))
    return sent, body


def _forwarded(name: str) -> bool:
    if name in _DROPPED:
        return False
    if name in _KEPT:
        return True
    return not any(word in name for word in _SECRET_WORDS)


def _with_usage_asked(
    body: bytes, sent: list[tuple[str, str]]
) -> tuple[bytes, list[tuple[str, str]]]:
    encoding = next((v.lower() for k, v in sent if k == "content-encoding"), "identity")
    try:
        text = gzip.decompress(body) if encoding == "gzip" else body
        if encoding not in ("gzip", "identity"):
            return body, sent
        value = json.loads(text)
    except (ValueError, OSError, EOFError):
        return body, sent
    if not isinstance(value, dict) or not ask_for_usage(value):
        return body, sent
    kept = [(k, v) for k, v in sent if k != "content-encoding"]
    return json.dumps(value, separators=(",", ":")).encode(), kept


def answer_headers(headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(k, v) for k, v in headers if k.lower() not in _ANSWER_DROPPED]


def model_asked(request: ModelRequest) -> str:
    if request.model:
        return request.model
    with contextlib.suppress(ValueError, OSError, EOFError):
        body = request.body
        if request.headers.get("content-encoding", "").lower() == "gzip":
            body = gzip.decompress(body)
        value = json.loads(body)
        if isinstance(value, dict):
            return str(value.get("model") or "")
    return ""
