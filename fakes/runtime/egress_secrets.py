"""Egress secrets in the fake Runtime API: `PUT /v1/egress-secrets/{name}`,
`GET /v1/egress-secrets`, `DELETE /v1/egress-secrets/{name}`, held to Runtime's `security.md`
("Secrets sandboxes never see") and the `withruntime` 0.35 SDK's `runtime.secrets`:

- A secret has a name, a value and the hosts it may go to (1 to 16: names, or `*.domain` for
  the names under one). `header` (with `format`, `{value}` where the value goes) has the proxy
  set that header on every HTTPS request to the hosts instead. Up to 50 per account, each value
  at most 8 KiB of visible ASCII.
- Every sandbox of the account has an environment variable of the secret's name, holding a
  placeholder (`rtsec_…`); replacing a secret keeps it. `guest_env` is what the fake's
  sandboxes are given (`fakes/runtime/egress_proxy.py` puts the values in, on the way out).
- No answer, list or error ever carries a value. Deleting one erases it.

The fake's own choices, where the docs say nothing: a name must be an environment variable's
name (the docs put it in every sandbox's environment); a PUT answers 200 with the secret as
`GET` lists it (`name`, `hosts`, `header`, `format`, `placeholder`, `updatedAt`); past 50 it
answers 409 `quota_exceeded` (the docs' code for a limit); `rules` (paid accounts) and the
SDK's other fields (`only`, `env`, `githubApp`, `git`, `api`) are refused as not faked; the
list is `{"secrets": [...], "next": name | null}`, as the SDK reads it.
"""

from __future__ import annotations

import re
import secrets
import threading
import time
from dataclasses import dataclass
from typing import Any

from fakes.runtime.http import Request, Response, Route, RouteTable, error_response, json_response
from fakes.runtime.routes import refusal

MAX_SECRETS = 50
MAX_HOSTS = 16
MAX_VALUE_BYTES = 8 * 1024
SECRET = r"^/v1/egress-secrets/([^/]+)$"
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_HOST = re.compile(r"^(\*\.)?[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$")
_VISIBLE_ASCII = re.compile(r"^[\x20-\x7e]+$")
NOT_FAKED = ("rules", "only", "env", "githubApp", "git", "api")
KNOWN = ("value", "hosts", "header", "format")


@dataclass
class EgressSecret:
    name: str
    value: str
    hosts: tuple[str, ...]
    placeholder: str
    header: str | None = None
    format: str | None = None
    updated_at: float = 0.0

    def shown(self) -> dict[str, Any]:
        """As the API shows it: never the value."""
        shown: dict[str, Any] = {"name": self.name, "hosts": list(self.hosts)}
        if self.header is not None:
            shown |= {"header": self.header, "format": self.format or "{value}"}
        updated = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.updated_at))
        return shown | {"placeholder": self.placeholder, "updatedAt": updated}

    def goes_to(self, host: str) -> bool:
        """`host` is one of its hosts (`*.domain`: the names under domain, not domain)."""
        host = host.lower().rstrip(".")
        for allowed in self.hosts:
            if allowed.startswith("*.") and host.endswith(allowed[1:]):
                return True
            if host == allowed:
                return True
        return False


def secret_problems(name: str, body: Any) -> list[tuple[str, str]]:
    if not isinstance(body, dict):
        return [("body", "The body must be a JSON object.")]
    problems = [(k, f"{k}: not implemented by the fake.") for k in NOT_FAKED if k in body]
    problems += [
        (k, f"Unknown field {k}.") for k in sorted(body) if k not in KNOWN and k not in NOT_FAKED
    ]
    if not _NAME.match(name):
        problems.append(("name", "A secret's name is an environment variable's name."))
    value = body.get("value")
    if not isinstance(value, str) or not _VISIBLE_ASCII.match(value):
        problems.append(("value", "value must be visible ASCII."))
    elif len(value) > MAX_VALUE_BYTES:
        problems.append(("value", f"value may hold at most {MAX_VALUE_BYTES} bytes."))
    hosts = body.get("hosts")
    if not isinstance(hosts, list) or not 1 <= len(hosts) <= MAX_HOSTS:
        problems.append(("hosts", f"hosts must list 1 to {MAX_HOSTS} hosts."))
    elif not all(isinstance(h, str) and _HOST.match(h) for h in hosts):
        problems.append(("hosts", "Each host is a name or *.domain, in lower case."))
    header, form = body.get("header"), body.get("format")
    if header is not None and not (isinstance(header, str) and re.match(r"^[!-9;-~]+$", header)):
        problems.append(("header", "header must be a header's name."))
    if form is not None and not (isinstance(form, str) and "{value}" in form):
        problems.append(("format", "format must hold {value}."))
    if form is not None and header is None:
        problems.append(("format", "format goes with header."))
    return problems


class EgressSecrets:
    """The account's secrets: served by the API and read by its proxy (in the fake's loop) and
    by tests (in theirs)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._secrets: dict[str, EgressSecret] = {}

    def routes(self) -> RouteTable:
        return [
            Route("PUT", re.compile(SECRET), "egress_secret_set", self._set),
            Route("GET", re.compile(r"^/v1/egress-secrets$"), "egress_secrets", self._list),
            Route("DELETE", re.compile(SECRET), "egress_secret_delete", self._delete),
        ]

    def all(self) -> list[EgressSecret]:
        with self._lock:
            return sorted(self._secrets.values(), key=lambda s: s.name)

    def guest_env(self) -> dict[str, str]:
        """Each secret's placeholder, in its name: in every sandbox of the account."""
        return {secret.name: secret.placeholder for secret in self.all()}

    def bound_to(self, host: str) -> list[EgressSecret]:
        """The secrets whose value may go to `host`."""
        return [secret for secret in self.all() if secret.goes_to(host)]

    async def _set(self, request: Request, groups: list[str]) -> Response:
        name, body = groups[0], request.json()
        problems = secret_problems(name, body)
        if problems:
            return refusal(400, "invalid_request", problems)
        with self._lock:
            held = self._secrets.get(name)
            if held is None and len(self._secrets) >= MAX_SECRETS:
                return error_response(
                    409,
                    "quota_exceeded",
                    f"An account holds at most {MAX_SECRETS} secrets for sandboxes.",
                    hint="Delete one you no longer need.",
                )
            placeholder = held.placeholder if held else "rtsec_" + secrets.token_hex(16)
            secret = EgressSecret(
                name=name,
                value=body["value"],
                hosts=tuple(body["hosts"]),
                placeholder=placeholder,
                header=body.get("header"),
                format=body.get("format"),
                updated_at=time.time(),
            )
            self._secrets[name] = secret
        return json_response(secret.shown())

    async def _list(self, request: Request, _: list[str]) -> Response:
        after = request.arg("after") or ""
        limit = max(1, min(100, int(request.arg("limit") or 100)))
        listed = [s for s in self.all() if s.name > after]
        page = listed[:limit]
        more = len(listed) > limit
        return json_response(
            {"secrets": [s.shown() for s in page], "next": page[-1].name if more else None}
        )

    async def _delete(self, request: Request, groups: list[str]) -> Response:
        with self._lock:
            removed = self._secrets.pop(groups[0], None)
        if removed is None:
            return error_response(404, "not_found", f"No secret named {groups[0]}.")
        return json_response({"name": removed.name, "deleted": True})
