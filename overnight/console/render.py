"""Pages from templates, under a strict Content-Security-Policy.

Jinja2 escapes everything (autoescape on for every template): what a run, a spec or an agent
wrote is shown as text, never as HTML. No template uses `|safe` on anything from a run. The
policy forbids inline scripts and styles, so a tag an agent smuggled in does nothing even if
escaping failed; the console's script and style are files under /static.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from starlette.requests import HTTPConnection
from starlette.responses import HTMLResponse

from overnight.console.auth import csrf_token
from overnight.console.context import console_of
from overnight.core.status_lines import usd as money_text

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
# On every response of the console (the app's middleware adds them), not only on pages.
SECURITY_HEADERS = {
    "content-security-policy": CONTENT_SECURITY_POLICY,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "cross-origin-opener-policy": "same-origin",
}
# The pages in the header's navigation: (path, label).
NAV = (("/", "Runs"), ("/night", "The night"))

templates = Environment(
    loader=PackageLoader("overnight.console", "templates"),
    autoescape=True,
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)


def page(
    request: HTTPConnection, template: str, context: dict[str, Any], status: int = 200
) -> HTMLResponse:
    """`template` drawn with `context` and what every page has: `viewer` (None on the login
    page), `csrf_token` (for its forms), `nav`, `path`."""
    html = templates.get_template(template).render(**page_context(request), **context)
    headers = {**SECURITY_HEADERS, "cache-control": "no-store"}
    return HTMLResponse(html, status_code=status, headers=headers)


def page_context(request: HTTPConnection) -> dict[str, Any]:
    found = getattr(request.state, "viewer", None)
    token = csrf_token(console_of(request).settings, found) if found is not None else ""
    return {"viewer": found, "csrf_token": token, "nav": NAV, "path": request.url.path}


def fragment(template: str, context: dict[str, Any]) -> str:
    """Part of a page (a row, a panel) for a server-sent event: escaped like a page."""
    return templates.get_template(template).render(**context)


# --- filters the templates share -------------------------------------------------------------


def ago(moment: datetime | None, now: datetime | None = None) -> str:
    """`3 min ago`, `2 h ago`, `yesterday`-like days; '-' for none."""
    if moment is None:
        return "-"
    seconds = ((now or datetime.now(UTC)) - moment).total_seconds()
    if seconds < 60:
        return "just now"
    if seconds < 3600:
        return f"{int(seconds // 60)} min ago"
    if seconds < 86400:
        return f"{seconds / 3600:.1f} h ago"
    return f"{int(seconds // 86400)} d ago"


def usd(value: float | None) -> str:
    """Money by the card's and `overnight status`'s rule (overnight.core.status_lines.usd)."""
    return "-" if value is None else money_text(value)


def utc(moment: datetime | None) -> str:
    return "-" if moment is None else moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


templates.filters.update(ago=ago, usd=usd, utc=utc)
