"""Who is looking, and whether they may act (docs/console.md, "Who may look and act").

A request is someone's in one of three ways, tried in this order:
1. from a trusted proxy (its address in the allowed list) carrying the user header: that user,
   with the role the role header or the operators list gives (reader otherwise);
2. `Authorization: Bearer <token>`: the operator's or the reader's token (a wrong one counts
   against its address, and past the bound a token is not checked: 429; sign_in_limit.py);
3. the session cookie the login form set (signed with the console's secret, HttpOnly,
   SameSite=Strict, bound to the token it was made from: a changed token ends it; signing
   out ends it in this process, a copy of the cookie too).
Nobody else gets a page: a browser is sent to the login form, anything else gets 401.

Every POST is checked by `operator` (or `checked` for what readers may do too, like signing
out): the role, and a CSRF token tied to the viewer's session (form field `csrf` or header
`X-CSRF-Token`), and the `Origin` when the browser sends one.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import json
import secrets
import time
from dataclasses import dataclass
from typing import Literal
from urllib.parse import quote

from starlette.exceptions import HTTPException
from starlette.requests import HTTPConnection, Request

from overnight.console.context import console_of
from overnight.console.settings import ConsoleSettings, Role
from overnight.console.sign_in_limit import Refusal

SESSION_COOKIE = "overnight_console"
CSRF_FIELD = "csrf"
CSRF_HEADER = "x-csrf-token"
Via = Literal["proxy", "token", "session"]


@dataclass(frozen=True)
class Viewer:
    name: str
    role: Role
    via: Via
    # What the CSRF token is bound to: the session, the token, or the proxy's user.
    session_id: str

    @property
    def may_act(self) -> bool:
        return self.role == "operator"


# --- who is it -------------------------------------------------------------------------------


def identify(request: HTTPConnection) -> Viewer | None:
    """The viewer of `request`, or None. A wrong bearer token is None, never a fall-through."""
    settings = console_of(request).settings
    if (found := _from_proxy(request, settings)) is not None:
        return found
    header = request.headers.get("authorization")
    if header is not None:
        scheme, _, given = header.partition(" ")
        if scheme.lower() != "bearer":
            return None
        limiter, address = console_of(request).sign_ins, peer(request)
        refused = limiter.refusal(address)
        if refused is not None:
            raise HTTPException(429, too_many(refused), headers=retry_after(refused))
        role = token_role(settings, given.strip())
        if role is None:
            limiter.failed(address)  # checked and no call awaited since: no race past the bound
            return None
        return Viewer("token", role, "token", f"token:{fingerprint(given.strip())}")
    found = _from_session(request.cookies.get(SESSION_COOKIE), settings)
    if found is not None and found.session_id in _signed_out(request):
        return None  # signed out: a copy of its cookie is no one's
    return found


async def viewer(request: HTTPConnection) -> Viewer:
    """The viewer, or the way to sign in: a browser's page request is sent to the login form
    (303), anything else (SSE, scripts) gets 401."""
    found = identify(request)
    if found is None:
        accepts_html = "text/html" in request.headers.get("accept", "")
        if request.scope.get("method") == "GET" and accepts_html:
            target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
            raise HTTPException(303, headers={"Location": f"/login?next={quote(target)}"})
        raise HTTPException(
            401,
            "sign in: a token as Authorization: Bearer, or the login form at /login",
            headers={"WWW-Authenticate": 'Bearer realm="overnight console"'},
        )
    request.state.viewer = found
    return found


async def operator(request: Request) -> Viewer:
    """The viewer of a POST that acts on a run: an operator, with the CSRF token; 403 else."""
    found = await checked(request)
    if not found.may_act:
        raise HTTPException(403, f"{found.name} may look, not act (a reader's role)")
    return found


async def checked(request: Request) -> Viewer:
    """The viewer of any POST, with its CSRF token and a same-site origin checked; 403 else."""
    found = await viewer(request)
    if not same_origin(request):
        raise HTTPException(403, "this form was sent from another site")
    given = request.headers.get(CSRF_HEADER)
    if given is None:
        form = await request.form()
        value = form.get(CSRF_FIELD)
        given = value if isinstance(value, str) else None
    expected = csrf_token(console_of(request).settings, found)
    if given is None or not hmac.compare_digest(given.encode(), expected.encode()):
        raise HTTPException(403, "the form's CSRF token is missing or stale: reload the page")
    return found


def same_origin(request: HTTPConnection) -> bool:
    """False when the browser says the request came from another site: `Sec-Fetch-Site`
    (every current browser sends it), else the `Origin`. Under `Referrer-Policy: no-referrer`
    a browser's own form posts say `Origin: null`; that, or nothing (a script), leaves it to
    the CSRF token."""
    site = request.headers.get("sec-fetch-site")
    if site is not None:
        return site in ("same-origin", "none")
    origin = request.headers.get("origin")
    if origin is None or origin == "null":
        return True
    host = request.headers.get("host", "")
    return origin in (f"http://{host}", f"https://{host}")


def _from_proxy(request: HTTPConnection, settings: ConsoleSettings) -> Viewer | None:
    if settings.user_header is None or request.client is None:
        return None
    # Said once, one name: a proxy that adds its header to the browser's own (instead of
    # replacing it) would otherwise let the browser's, first, name anyone.
    users = request.headers.getlist(settings.user_header)
    user = users[0].strip() if len(users) == 1 else ""
    if not user or "," in user or not trusted_peer(settings, request.client.host):
        return None
    role: Role = "operator" if user in settings.operators else "reader"
    if settings.role_header is not None:
        roles = request.headers.getlist(settings.role_header)
        said = roles[0].strip().lower() if len(roles) == 1 else "reader" if roles else ""
        if said in ("operator", "reader"):
            role = "operator" if said == "operator" else "reader"
    return Viewer(user[:200], role, "proxy", f"proxy:{user}")


def peer(request: HTTPConnection) -> str:
    """The address the request came from: the connection's, never one a header claims."""
    return request.client.host if request.client is not None else ""


def too_many(refused: Refusal) -> str:
    minutes = max(1, round(refused.retry_after / 60))
    whose = "from your address" if refused.whose == "address" else "from many addresses"
    return f"Too many wrong tokens {whose}: try again in {minutes} min."


def retry_after(refused: Refusal) -> dict[str, str]:
    return {"Retry-After": str(refused.retry_after)}


def trusted_peer(settings: ConsoleSettings, host: str) -> bool:
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return any(address in network for network in settings.trusted_proxies)


def token_role(settings: ConsoleSettings, given: str) -> Role | None:
    """The role a token gives, compared in constant time; None for a token it does not know."""
    role: Role | None = None
    for token, its_role in ((settings.operator_token, "operator"), (settings.read_token, "reader")):
        if token is not None and hmac.compare_digest(given.encode(), token.encode()):
            role = "operator" if its_role == "operator" else "reader"
    return role


def fingerprint(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()[:16]


# --- sessions and CSRF -----------------------------------------------------------------------


def session_cookie(settings: ConsoleSettings, role: Role, token: str, now: float) -> str:
    """A signed session for the holder of `token`: role, the token's fingerprint, an id for
    the CSRF token, and when it ends."""
    body = {
        "r": role,
        "k": fingerprint(token),
        "s": secrets.token_urlsafe(16),
        "e": int(now + settings.session_hours * 3600),
    }
    encoded = _b64(json.dumps(body, separators=(",", ":")).encode())
    return f"{encoded}.{_sign(settings, encoded)}"


def _from_session(cookie: str | None, settings: ConsoleSettings) -> Viewer | None:
    if not cookie or cookie.count(".") != 1:
        return None
    encoded, signature = cookie.split(".")
    if not hmac.compare_digest(signature.encode(), _sign(settings, encoded).encode()):
        return None
    try:
        body = json.loads(base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)))
        role, key, sid, ends = str(body["r"]), str(body["k"]), str(body["s"]), int(body["e"])
    except (ValueError, KeyError, TypeError):
        return None
    token = settings.operator_token if role == "operator" else settings.read_token
    if ends < time.time() or token is None or not hmac.compare_digest(key, fingerprint(token)):
        return None  # expired, or its token changed since
    its_role: Role = "operator" if role == "operator" else "reader"
    return Viewer("token", its_role, "session", f"s:{sid}")


def sign_out(request: HTTPConnection, found: Viewer) -> None:
    """End `found`'s session in this process (its cookie, a copy of it too, is no one's
    until it would have ended anyway)."""
    if found.via != "session":
        return
    ended, now = _signed_out(request), time.time()
    for session_id, until in list(ended.items()):
        if until < now:
            del ended[session_id]
    ended[found.session_id] = now + console_of(request).settings.session_hours * 3600


def _signed_out(request: HTTPConnection) -> dict[str, float]:
    """The sessions signed out in this process: id -> when its cookie ends."""
    state = request.app.state
    if not hasattr(state, "signed_out"):
        state.signed_out = {}
    ended: dict[str, float] = state.signed_out
    return ended


def csrf_token(settings: ConsoleSettings, found: Viewer) -> str:
    return _sign(settings, f"csrf\0{found.session_id}")


def _sign(settings: ConsoleSettings, text: str) -> str:
    digest = hmac.new(settings.session_secret, text.encode(), hashlib.sha256).digest()
    return _b64(digest)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")
