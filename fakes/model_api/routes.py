"""Which API a request's path speaks, and a turn rendered as that API's answer: pure.

- `POST /v1/messages` (`?beta=true` or not): Anthropic Messages (`anthropic.py`);
- `POST /v1/responses`: OpenAI Responses (`openai.py`);
- `POST /v1/chat/completions`: OpenAI Chat Completions (`chat.py`);
- `POST /v1beta/models/MODEL:streamGenerateContent` and `...:generateContent`: the Gemini API
  (`gemini.py`; the model is the path's).

Whether an answer is streamed: the Gemini API's method says so (`:streamGenerateContent`, as
Server-Sent Events when asked `alt=sse`); for the others every answer is streamed, unless the
fake honours the body's `"stream"` (`honour_stream`), as the real APIs do.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, urlsplit

from fakes.model_api import anthropic, chat, gemini, openai
from fakes.model_api.recorded import RecordedRequest, gemini_model
from fakes.model_api.reply import Reply
from fakes.model_api.turns import Answer, Api

ROUTES: dict[str, Api] = {
    "/v1/messages": "anthropic",
    "/v1/responses": "openai",
    "/v1/chat/completions": "chat",
}
GEMINI_PREFIX = "/v1beta/models/"
GEMINI_STREAM = ":streamGenerateContent"
GEMINI_METHODS = (GEMINI_STREAM, ":generateContent")
RENDERERS: dict[Api, Callable[..., Reply]] = {
    "anthropic": anthropic.render,
    "openai": openai.render,
    "chat": chat.render,
    "gemini": gemini.render,
}


def route(target: str) -> Api | None:
    """The API a request target (path and query) is for; None: the fake does not serve it."""
    path = urlsplit(target).path.rstrip("/")
    if path in ROUTES:
        return ROUTES[path]
    if path.startswith(GEMINI_PREFIX) and path.endswith(GEMINI_METHODS) and gemini_model(path):
        return "gemini"
    return None


def render(request: RecordedRequest, turn: Answer, now: float, *, honour_stream: bool) -> Reply:
    """`turn` as the answer to `request`, in its API's shape."""
    body: dict[str, Any] = request.body if isinstance(request.body, dict) else {}
    if request.api == "gemini":
        alt = parse_qs(request.query).get("alt", [""])[-1]
        return gemini.render(
            turn,
            request.number,
            request.model,
            now,
            streamed=request.path.endswith(GEMINI_STREAM),
            sse=alt == "sse",
        )
    options = body.get("stream_options")
    return RENDERERS[request.api](
        turn,
        request.number,
        request.model,
        now,
        streamed=not honour_stream or body.get("stream") is True,
        include_usage=isinstance(options, dict) and options.get("include_usage") is True,
    )
