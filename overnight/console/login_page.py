"""Signing in with a token through a form (`/login`), and out (`/logout`).

The form sets the session cookie (overnight.console.auth): HttpOnly, SameSite=Strict, signed,
`Secure` when the console is served over https. The form itself carries a CSRF token of its
own, a random value also set as a cookie for `/login` only (double submit), so no other site
can sign a browser in as someone else. A wrong token counts against the address it came from
and everyone's (overnight/console/sign_in_limit.py): past the bound the form answers 429 with
`Retry-After`, the token unchecked.
"""

from __future__ import annotations

import hmac
import secrets
import time

from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from overnight.console import auth
from overnight.console.context import console_of
from overnight.console.render import page

LOGIN_CSRF_COOKIE = "overnight_console_login"
REFUSED = "That token is not one this console knows."


async def login_form(request: Request) -> Response:
    if auth.identify(request) is not None:
        return RedirectResponse(_next(request.query_params.get("next")), status_code=303)
    return _form(request, _next(request.query_params.get("next")), refused=None)


async def login(request: Request) -> Response:
    form = await request.form()
    expected = request.cookies.get(LOGIN_CSRF_COOKIE, "")
    if not auth.same_origin(request) or not expected or not _same(form, "csrf", expected):
        raise HTTPException(403, "the sign-in form is stale or from another site: reload it")
    context = console_of(request)
    settings = context.settings
    token = _field(form, "token").strip()
    target = _next(_field(form, "next"))
    # From here to the failure counted, nothing is awaited: no race of requests past the bound.
    limiter, address = context.sign_ins, auth.peer(request)
    refused = limiter.refusal(address)
    if refused is not None:
        response = _form(request, target, refused=auth.too_many(refused), status=429)
        response.headers.update(auth.retry_after(refused))
        return response
    role = auth.token_role(settings, token) if token else None
    if role is None:
        limiter.failed(address)
        return _form(request, target, refused=REFUSED, status=401)
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(
        auth.SESSION_COOKIE,
        auth.session_cookie(settings, role, token, time.time()),
        max_age=int(settings.session_hours * 3600),
        path="/",
        httponly=True,
        samesite="strict",
        secure=settings.secure_cookie,
    )
    response.delete_cookie(LOGIN_CSRF_COOKIE, path="/login")
    return response


async def logout(request: Request) -> Response:
    auth.sign_out(request, await auth.checked(request))
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(auth.SESSION_COOKIE, path="/", httponly=True, samesite="strict")
    return response


def _form(request: Request, target: str, *, refused: str | None, status: int = 200) -> Response:
    value = secrets.token_urlsafe(24)
    context = {"login_csrf": value, "next": target, "refused": refused}
    response = page(request, "login.html", context, status=status)
    settings = console_of(request).settings
    response.set_cookie(
        LOGIN_CSRF_COOKIE,
        value,
        max_age=3600,
        path="/login",
        httponly=True,
        samesite="strict",
        secure=settings.secure_cookie,
    )
    return response


def _next(target: str | None) -> str:
    """Where to go after signing in: a path of this console only, never another site."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target


def _field(form: FormData, name: str) -> str:
    value = form.get(name)
    return value if isinstance(value, str) else ""


def _same(form: FormData, name: str, expected: str) -> bool:
    return hmac.compare_digest(_field(form, name).encode(), expected.encode())


routes: list[BaseRoute] = [
    Route("/login", login_form, methods=["GET"]),
    Route("/login", login, methods=["POST"]),
    Route("/logout", logout, methods=["POST"]),
]
