"""The Gemini API's routes (generativelanguage.googleapis.com, v1beta) at the gateway: a
request's model is in its path, not its body, and its method after a colon:

    POST /model/v1beta/models/{model}:streamGenerateContent?alt=sse   (SSE chunks)
    POST /model/v1beta/models/{model}:generateContent                 (one JSON answer)
    POST /model/v1beta/models/{model}:countTokens                     (no tokens used)

Of the query only `alt` goes upstream: `key` is a credential (the caller's model token, when it
comes there; never forwarded), anything else is not the gateway's to pass on. Pure: the routes
(model_routes.py) do the I/O.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlencode

from activities.gateway.model_request import ModelRequest

PREFIX = "/model/v1beta/"
MODELS = PREFIX + "models/"
UPSTREAM = "https://generativelanguage.googleapis.com"
# Method -> whether its answers use tokens (are booked).
METHODS = {"streamGenerateContent": True, "generateContent": True, "countTokens": False}
# A model's id as Google names them (`gemini-2.5-pro`, `gemini-2.5-flash-preview-05-20`): no
# slash, no escape, so the path sent upstream is the one checked here.
MODEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
KEPT_QUERY = frozenset({"alt"})


def gemini_request(
    path: str, query: str, headers: dict[str, str], body: bytes
) -> ModelRequest | None:
    """The request on a Gemini route; None when `path` is not one."""
    if not path.startswith(MODELS):
        return None
    model, colon, method = path[len(MODELS) :].partition(":")
    if not colon or method not in METHODS or not MODEL.match(model):
        return None
    return ModelRequest(
        "generate_content",
        f"/v1beta/models/{model}:{method}",
        forwarded_query(query),
        headers,
        body,
        model=model,
        metered=METHODS[method],
    )


def forwarded_query(query: str) -> str:
    """The query sent upstream: its `alt` (`sse` asks for Server-Sent Events), nothing else."""
    pairs = parse_qsl(query, keep_blank_values=True)
    return urlencode([(name, value) for name, value in pairs if name in KEPT_QUERY])


def query_token(query: str) -> str:
    """The caller's API key given as `?key=` (the Gemini API takes it there too); "" if none."""
    return next((value.strip() for name, value in parse_qsl(query) if name == "key"), "")


def is_gemini_path(path: str) -> bool:
    """A path under the Gemini API's prefix, a route or not (its errors in Google's shape)."""
    return path.startswith(PREFIX)


def caller_token(token: str, request: ModelRequest, query: str) -> str:
    """The caller's model token: the one its headers carry, else (Gemini) its `?key=`."""
    return token or (query_token(query) if request.api == "generate_content" else "")
