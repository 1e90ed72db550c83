"""A small GitHub REST client for the worker: the standard library, blocking (run it in a
thread: `asyncio.to_thread`), one per worker and API URL so its ETag cache serves every poll.

- **Where**: `https://api.github.com`, or an Enterprise server's `https://HOST/api/v3`
  (`api_url_for` in `repo_url.py`; `OVERNIGHT_GITHUB_API_URL` overrides it).
- **Who**: the worker's token (`OVERNIGHT_GITHUB_TOKEN`, or a GitHub App's installation
  token the worker made), sent as `Authorization: Bearer`. It is never logged, never in an
  error (GitHub's own messages are redacted of it too), never in the client's `repr`, and
  never follows a redirect: a `3xx` is an error, so no other host is ever sent it.
- **Again**: rate limits and server errors are tried again by GitHub's rules (`retry.py`),
  within `RetryRules.max_tries` and `max_wait_seconds`; past them the error is `retryable`
  and says how long GitHub asked to wait, for the caller (a Temporal retry) to wait out.
  Writes are spaced `write_gap_seconds` apart.
- **Polls**: a `GET` sends the `ETag` it last got for that URL as `If-None-Match`; GitHub's
  `304 Not Modified` costs no request of the rate limit, and the cached answer is returned.
"""

from __future__ import annotations

import ipaddress
import json
import threading
import time
import urllib.error
import urllib.request
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

from activities.github.retry import RetryRules, Wait, backoff, is_rate_limit, wait_for_answer
from overnight.core.output_tail import redact

TOKEN_ENV = "OVERNIGHT_GITHUB_TOKEN"
API_URL_ENV = "OVERNIGHT_GITHUB_API_URL"
API_VERSION = "2022-11-28"
JSON_MEDIA_TYPE = "application/vnd.github+json"
RAW_MEDIA_TYPE = "application/vnd.github.raw+json"
USER_AGENT = "overnight"
MAX_ANSWER_BYTES = 8 * 1024 * 1024
CACHE_ENTRIES = 256


class GitHubError(Exception):
    """A request that did not succeed. `status` 0: no answer (the connection failed);
    `retryable`: a later try may succeed (`wait_seconds`: what GitHub asked, when it did);
    `details`: the messages of GitHub's validation errors (a `422`'s `errors`)."""

    def __init__(
        self,
        message: str,
        *,
        status: int = 0,
        retryable: bool = False,
        wait_seconds: float | None = None,
        details: tuple[str, ...] = (),
    ) -> None:
        super().__init__(message)
        self.status = status
        self.retryable = retryable
        self.wait_seconds = wait_seconds
        self.details = details


@dataclass(frozen=True)
class Response:
    status: int
    headers: Mapping[str, str]  # lower-case names
    data: Any  # the JSON, or the text of a raw media type
    from_cache: bool = False  # a 304: this is the answer cached with its ETag


class EtagCache:
    """The last answer to each `GET` with its ETag, the most recently used kept (bounded)."""

    def __init__(self, entries: int = CACHE_ENTRIES) -> None:
        self.entries = entries
        self._kept: OrderedDict[str, tuple[str, Response]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> tuple[str, Response] | None:
        with self._lock:
            found = self._kept.get(key)
            if found is not None:
                self._kept.move_to_end(key)
            return found

    def keep(self, key: str, etag: str, answer: Response) -> None:
        with self._lock:
            self._kept[key] = (etag, answer)
            self._kept.move_to_end(key)
            while len(self._kept) > self.entries:
                self._kept.popitem(last=False)


@dataclass
class GitHubClient:
    api_url: str
    token: str = field(repr=False)
    rules: RetryRules = RetryRules()
    timeout_seconds: float = 30
    # Injected so an activity can heartbeat while it waits, and tests can count.
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.time
    # Shared by the clients of one worker (`connect.client_for`), so every poll finds it.
    cache: EtagCache = field(default_factory=EtagCache, repr=False)
    _last_write: float = field(default=float("-inf"), repr=False)

    def __post_init__(self) -> None:
        self.api_url = self.api_url.rstrip("/")
        if not self.token:
            raise GitHubError(f"no GitHub token: set {TOKEN_ENV} in the worker's environment")

    def get(
        self, path: str, query: Mapping[str, str] | None = None, *, accept: str = JSON_MEDIA_TYPE
    ) -> Response:
        return self.request("GET", path, query=query, accept=accept)

    def post(self, path: str, body: Any) -> Response:
        return self.request("POST", path, body=body)

    def patch(self, path: str, body: Any) -> Response:
        return self.request("PATCH", path, body=body)

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        body: Any = None,
        accept: str = JSON_MEDIA_TYPE,
    ) -> Response:
        """One API call, tried again by GitHub's rules; a 2xx (or a 304 from the cache), else
        `GitHubError`. `path` starts with `/` (`/repos/o/r/pulls`); its parts are the
        caller's to quote (`path_part`)."""
        url = self.api_url + path + ("?" + urlencode(dict(query)) if query else "")
        what = f"{method} {path}"
        waited, limited, status = 0.0, 0, 0
        for attempt in range(1, self.rules.max_tries + 1):
            if method != "GET":
                self._space_writes()
            try:
                answer = self._once(method, url, body, accept)
            except _NoAnswer as error:
                wait, status = Wait(backoff(attempt, self.rules), error.reason), 0
            else:
                status = answer.status
                if 200 <= answer.status < 300 or answer.from_cache:
                    return answer
                message = self._message(answer)
                wait_or_none = wait_for_answer(
                    answer.status,
                    answer.headers,
                    message,
                    attempt=attempt,
                    limited_before=limited,
                    now=self.clock(),
                    rules=self.rules,
                )
                if wait_or_none is None:
                    raise _refusal(what, answer, message)
                wait = wait_or_none
                if is_rate_limit(answer.status, answer.headers, message):
                    limited += 1
            if (
                attempt == self.rules.max_tries
                or waited + wait.seconds > self.rules.max_wait_seconds
            ):
                raise GitHubError(
                    f"{what}: {wait.why}; gave up after {attempt} tries and {waited:.0f} s "
                    f"(GitHub asked for {wait.seconds:.0f} s more)",
                    status=status,
                    retryable=True,
                    wait_seconds=wait.seconds,
                )
            self.sleep(wait.seconds)
            waited += wait.seconds
        raise AssertionError("unreachable")  # the loop returns or raises

    # --- one request ---

    def _once(self, method: str, url: str, body: Any, accept: str) -> Response:
        headers = {
            "Accept": accept,
            "Authorization": f"Bearer {self.token}",
            "User-Agent": USER_AGENT,
            "X-GitHub-Api-Version": API_VERSION,
        }
        key = f"{accept} {url}"
        cached = self.cache.get(key) if method == "GET" else None
        if cached is not None:
            headers["If-None-Match"] = cached[0]
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(url, data=data, headers=headers, method=method)
        try:
            with _opener(url).open(request, timeout=self.timeout_seconds) as reply:
                status, raw, got = reply.status, reply.read(MAX_ANSWER_BYTES), reply.headers
        except urllib.error.HTTPError as error:
            status, got = error.code, error.headers
            raw = error.read(MAX_ANSWER_BYTES) if error.fp is not None else b""
        except (OSError, ValueError) as error:  # refused, reset, timed out, cut short
            raise _NoAnswer(f"no answer ({type(error).__name__})") from None
        lowered = {name.lower(): value for name, value in got.items()}
        if status == 304 and cached is not None:
            return Response(cached[1].status, lowered, cached[1].data, from_cache=True)
        answer = Response(status, lowered, _parse(raw, lowered))
        if method == "GET" and status == 200 and "etag" in lowered:
            self.cache.keep(key, lowered["etag"], answer)
        return answer

    def _space_writes(self) -> None:
        gap = self._last_write + self.rules.write_gap_seconds - time.monotonic()
        if gap > 0:
            self.sleep(gap)
        self._last_write = time.monotonic()

    def _message(self, answer: Response) -> str:
        data = answer.data
        text = data.get("message") if isinstance(data, dict) else None
        return redact(str(text or ""), [self.token])[:500]


def path_part(value: str) -> str:
    """One part of an API path, percent-encoded (a branch `agent/x` is `agent%2Fx`)."""
    return quote(value, safe="")


def validation_messages(data: Any) -> tuple[str, ...]:
    """The messages (or `field code` pairs) of a `422`'s `errors`."""
    errors = data.get("errors") if isinstance(data, dict) else None
    found = []
    for error in errors if isinstance(errors, list) else []:
        if isinstance(error, dict):
            text = error.get("message") or f"{error.get('field', '')} {error.get('code', '')}"
            found.append(str(text).strip())
        elif isinstance(error, str):
            found.append(error)
    return tuple(found)


class _NoAnswer(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _refusal(what: str, answer: Response, message: str) -> GitHubError:
    details = validation_messages(answer.data)
    said = "; ".join(d for d in (message, *details) if d)
    return GitHubError(
        f"{what}: HTTP {answer.status}" + (f": {said}" if said else ""),
        status=answer.status,
        details=details,
    )


def _parse(raw: bytes, headers: Mapping[str, str]) -> Any:
    text = raw.decode("utf-8", errors="replace")
    if "json" not in headers.get("content-type", "") or not text:
        return text
    try:
        return json.loads(text)
    except ValueError:
        return text


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    # A redirect would carry the token to wherever it points: it is an answer, not followed.
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def _opener(url: str) -> urllib.request.OpenerDirector:
    handlers: list[urllib.request.BaseHandler] = [_NoRedirects()]
    host = urlsplit(url).hostname or ""
    if host == "localhost" or _loopback(host):
        handlers.append(urllib.request.ProxyHandler({}))  # a proxy cannot reach our loopback
    return urllib.request.build_opener(*handlers)


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
