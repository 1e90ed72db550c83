"""Notifications in the worker: whom to tell, what to post, how it is signed, and the POST.

The receivers of a notification are the run's `notify` webhooks that want its event, and the
worker-wide default from the environment:

- `OVERNIGHT_NOTIFY_URL`: one or more URLs (comma or space separated);
- `OVERNIGHT_NOTIFY_FORMAT`: `json` (default) or `slack`;
- `OVERNIGHT_NOTIFY_ON_RESTART`: `1` to hear of every restart too;
- `OVERNIGHT_NOTIFY_SECRET`: the signing secret (also of spec webhooks without `secret_env`; a
  webhook's own `secret_env` must be a name the worker allows: `OVERNIGHT_SECRET_ENV`).

Each POST carries `X-Overnight-Timestamp` (Unix seconds) and, when there is a secret,
`X-Overnight-Signature: sha256=<hex HMAC-SHA256 of "<timestamp>.<body>">`, so a receiver can
check the body and refuse an old timestamp (a replay). The JSON body carries the `event_id`
(the same on every retry), so it is signed: a receiver drops a repeat by it. `Idempotency-Key`
repeats it for receivers that key on the header, which is not signed. Every value of the run's
`secret_env` found in this worker's environment is replaced by `***` in the body, whatever field
it is in. The JSON body is data, each value in its own field, escaped for no page; the Slack
text escapes agent text by Slack's rules (overnight.core.agent_text).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import re
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from activities.notify.models import Notification
from overnight.core.agent_text import slack_block, slack_inline
from overnight.core.grants import SECRET_ENV_ENV, Grants
from overnight.core.notify_spec import DEFAULT_SECRET_ENV, NotifyFormat, check_url
from overnight.core.output_tail import redact, secret_values

URL_ENV = "OVERNIGHT_NOTIFY_URL"
FORMAT_ENV = "OVERNIGHT_NOTIFY_FORMAT"
ON_RESTART_ENV = "OVERNIGHT_NOTIFY_ON_RESTART"
SECRET_ENV = DEFAULT_SECRET_ENV
POST_TIMEOUT_SECONDS = 10
USER_AGENT = "overnight-notify/1"
SLACK_TAIL_LINES = 15
_SPLIT = re.compile(r"[\s,]+")
_HEADLINES = {
    "needs_attention": ":rotating_light: needs attention",
    "failed": ":x: failed",
    "finished": ":white_check_mark: finished",
    "cancelled": ":no_entry_sign: cancelled",
    "restart": ":arrows_counterclockwise: restarted",
    "waiting_for_answer": ":question: asks a question",
}
# Answers worth trying again: the receiver may be back, or less busy, later.
_RETRYABLE_STATUS = {408, 425, 429}


@dataclass(frozen=True)
class Target:
    key: str
    url: str | None
    format: NotifyFormat
    secret: str | None = None
    # Why it cannot be sent from this worker, and whether another try (maybe on another
    # worker) could (its URL variable is not set here) or not (the URL is not one).
    problem: str | None = None
    problem_lasts: bool = False


@dataclass(frozen=True)
class Delivery:
    ok: bool
    retryable: bool
    detail: str


def targets(
    note: Notification, environ: Mapping[str, str], grants: Grants | None = None
) -> list[Target]:
    """Everyone to tell of `note`, keyed `spec-<i>` (the run's webhooks) and `worker-<j>`.
    A webhook whose `secret_env` the worker does not allow (`grants`) is not sent to."""
    found: list[Target] = []
    default_secret = environ.get(SECRET_ENV) or None
    for i, hook in enumerate(note.webhooks):
        if not hook.wants(note.event):
            continue
        named = hook.secret_env if hook.secret_env not in (None, SECRET_ENV) else None
        if named is not None and not (grants or Grants()).allows_secret(named):
            problem = (
                f"secret_env {named} is not in this worker's allow-list (start the worker with "
                f"{SECRET_ENV_ENV}={named} to allow it)"
            )
            found.append(Target(f"spec-{i}", None, hook.format, None, problem, True))
            continue
        secret = environ.get(named) if named else default_secret
        url = hook.url or environ.get(hook.url_env or "") or None
        if url is None:
            problem = f"{hook.url_env} is not set in this worker's environment"
            found.append(Target(f"spec-{i}", None, hook.format, None, problem))
            continue
        bad = _url_problem(url, hook.url_env) if hook.url_env else None
        found.append(Target(f"spec-{i}", url, hook.format, secret or None, bad, bad is not None))
    wants_restarts = environ.get(ON_RESTART_ENV, "").strip().lower() in ("1", "true", "yes")
    if note.event == "restart" and not wants_restarts:
        return found
    fmt: NotifyFormat = "slack" if environ.get(FORMAT_ENV, "").strip() == "slack" else "json"
    for j, url in enumerate(u for u in _SPLIT.split(environ.get(URL_ENV, "")) if u):
        bad = _url_problem(url, URL_ENV)
        found.append(Target(f"worker-{j}", url, fmt, default_secret, bad, bad is not None))
    return found


def _url_problem(url: str, where: str) -> str | None:
    try:
        check_url(url, where)
    except ValueError as error:
        return str(error)
    return None


def payload(note: Notification, web_ui: str | None) -> dict[str, Any]:
    """The JSON a receiver gets (format `json`)."""
    return {
        "type": f"overnight.run.{note.event}",
        "event": note.event,
        "event_id": note.event_id,
        "run_id": note.run_id,
        "state": note.state,
        "reason": note.reason,
        "at": note.at.isoformat(),
        "attempt": note.attempt,
        "restarts_used": note.restarts_used,
        "budget": note.budget.model_dump(mode="json"),
        "budget_left": note.budget_left.model_dump(mode="json"),
        "hours_used": note.hours_used,
        "spend_usd": note.spend_usd,
        "next_step": note.next_step,
        "output_tail": None
        if note.output_tail is None
        else {"attempt": note.output_attempt, "text": note.output_tail},
        # What the agent's finish() handed over (finished runs): {"summary", "values"}.
        "outputs": None if note.outputs is None else note.outputs.model_dump(mode="json"),
        # The commit the run's branch on the origin holds, and its pull request (finished).
        "pushed_commit": note.pushed_commit,
        "pull_request_url": note.pull_request_url,
        "web_ui": web_ui,
    }


def slack_text(note: Notification, web_ui: str | None, secrets: Sequence[str] = ()) -> str:
    """The Slack message (format `slack`), `secrets` redacted from the agent's text before it is
    escaped (escaped, `sk_live` would read `sk＿live`, which no redaction after finds)."""

    def inline(text: str) -> str:
        return slack_inline(redact(text, secrets))

    left = note.budget_left
    budget = f"{left.restarts} restart{'s' if left.restarts != 1 else ''}, {left.hours:.1f} h"
    if left.spend_usd is not None:
        budget += f", ${left.spend_usd:.2f}"
    # The reason (a question, a summary), the next step and the output are agent text: each is
    # kept on its line (or in its code block) and shows as written (overnight.core.agent_text).
    headline = f"*overnight run `{slack_inline(note.run_id)}` {_HEADLINES[note.event]}*"
    lines = [
        f"{headline}: {inline(note.reason)}",
        f"attempt {note.attempt} · restarts used {note.restarts_used} · budget left: {budget}",
    ]
    if note.next_step:
        lines.append(f"next step: {inline(note.next_step)}")
    if note.output_tail:
        tail = "\n".join(note.output_tail.splitlines()[-SLACK_TAIL_LINES:])
        lines += [
            f"last output (attempt {note.output_attempt}):",
            slack_block(redact(tail, secrets)),
        ]
    if web_ui:
        lines.append(f"<{web_ui}|Open the run in the Temporal Web UI>")
    return "\n".join(lines)


def body(note: Notification, fmt: NotifyFormat, web_ui: str | None, secrets: list[str]) -> bytes:
    """The request body, every secret value redacted from every string in it."""
    data: Any = (
        {"text": slack_text(note, web_ui, secrets)} if fmt == "slack" else payload(note, web_ui)
    )
    return json.dumps(_redacted(data, secrets), separators=(",", ":")).encode()


def _redacted(value: Any, secrets: list[str]) -> Any:
    if isinstance(value, str):
        return redact(value, secrets)
    if isinstance(value, dict):
        return {k: _redacted(v, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [_redacted(v, secrets) for v in value]
    return value


def signature(secret: str, timestamp: str, data: bytes) -> str:
    """`sha256=` and the hex HMAC-SHA256 of `<timestamp>.<body>` under `secret`."""
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + data, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def headers(note: Notification, secret: str | None, data: bytes, now: float) -> dict[str, str]:
    timestamp = str(int(now))
    sent = {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        "Idempotency-Key": note.event_id,
        "X-Overnight-Event": note.event,
        "X-Overnight-Event-Id": note.event_id,
        "X-Overnight-Timestamp": timestamp,
    }
    if secret:
        sent["X-Overnight-Signature"] = signature(secret, timestamp, data)
    return sent


def deliver(
    target: Target, note: Notification, web_ui: str | None, environ: Mapping[str, str]
) -> Delivery:
    """One POST (blocking: run it in a thread). Never raises."""
    if target.problem is not None or target.url is None:
        return Delivery(False, not target.problem_lasts, target.problem or "no URL")
    data = body(note, target.format, web_ui, secret_values(note.secret_env, environ))
    request = urllib.request.Request(
        target.url,
        data=data,
        headers=headers(note, target.secret, data, time.time()),
        method="POST",
    )
    try:
        with _opener(target.url).open(request, timeout=POST_TIMEOUT_SECONDS) as answer:
            answer.read(64 * 1024)
            return Delivery(True, False, f"HTTP {answer.status}")
    except urllib.error.HTTPError as error:
        retryable = error.code >= 500 or error.code in _RETRYABLE_STATUS
        return Delivery(False, retryable, f"HTTP {error.code}")
    except (OSError, ValueError) as error:
        # Refused, reset, timed out, no route: the receiver may be back later.
        return Delivery(False, True, f"{type(error).__name__}: {error}")


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    # A redirected POST would arrive as a GET without its body: a redirect is an answer.
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def _opener(url: str) -> urllib.request.OpenerDirector:
    handlers: list[urllib.request.BaseHandler] = [_NoRedirects()]
    if _loopback(urlsplit(url).hostname or ""):
        handlers.append(urllib.request.ProxyHandler({}))  # a proxy cannot reach our loopback
    return urllib.request.build_opener(*handlers)


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
