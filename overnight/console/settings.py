"""What the console is told by its command line and its environment: where it listens and who
may look and act. Read once at start; a bad setting is refused with one line naming it and the
fix (`ConsoleSettingsError`, printed like every CLI error: overnight/cli/error_text.py).

Who may come in (docs/console.md, "Who may look and act"):
- `OVERNIGHT_CONSOLE_TOKEN`: the operator's token (may look and act);
- `OVERNIGHT_CONSOLE_READ_TOKEN`: a reader's token (may look only), optional;
- behind a reverse proxy's single sign-on: `OVERNIGHT_CONSOLE_USER_HEADER` names the header the
  proxy puts the signed-in user in, `OVERNIGHT_CONSOLE_TRUSTED_PROXIES` the proxies' addresses
  (IPs or networks) it is believed from; the role comes from `OVERNIGHT_CONSOLE_ROLE_HEADER`
  (its value `operator` or `reader`) or `OVERNIGHT_CONSOLE_OPERATORS` (user names), else reader.
With none of these on a loopback address, the console makes an operator token of its own and
prints it once; on any other address it refuses to start.
"""

from __future__ import annotations

import ipaddress
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from overnight.core.errors import OvernightError

Role = Literal["reader", "operator"]

DEFAULT_ADDRESS = "127.0.0.1"
DEFAULT_PORT = 8234
TOKEN_ENV = "OVERNIGHT_CONSOLE_TOKEN"
READ_TOKEN_ENV = "OVERNIGHT_CONSOLE_READ_TOKEN"
USER_HEADER_ENV = "OVERNIGHT_CONSOLE_USER_HEADER"
ROLE_HEADER_ENV = "OVERNIGHT_CONSOLE_ROLE_HEADER"
TRUSTED_PROXIES_ENV = "OVERNIGHT_CONSOLE_TRUSTED_PROXIES"
OPERATORS_ENV = "OVERNIGHT_CONSOLE_OPERATORS"
# Signs the session cookies; unset, a new one each start (every session ends with the process).
SECRET_ENV = "OVERNIGHT_CONSOLE_SECRET"
SESSION_HOURS_ENV = "OVERNIGHT_CONSOLE_SESSION_HOURS"
# Set when the console is served over https (behind a proxy): the cookie gets `Secure`.
SECURE_COOKIE_ENV = "OVERNIGHT_CONSOLE_SECURE_COOKIE"
# A token shorter than this is guessable in a night of tries.
MIN_TOKEN_CHARS = 16
MIN_SECRET_CHARS = 32

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class ConsoleSettingsError(OvernightError):
    """A console setting that cannot work: one line naming it and the fix."""

    bad_input = True


@dataclass(frozen=True)
class ConsoleSettings:
    address: str = DEFAULT_ADDRESS
    port: int = DEFAULT_PORT
    operator_token: str | None = None
    read_token: str | None = None
    # The operator token was made by this process (none was configured): print it at start.
    token_made_here: bool = False
    user_header: str | None = None
    role_header: str | None = None
    trusted_proxies: tuple[Network, ...] = ()
    operators: frozenset[str] = frozenset()
    session_secret: bytes = field(default_factory=lambda: secrets.token_bytes(32), repr=False)
    session_hours: float = 12.0
    secure_cookie: bool = False

    @property
    def behind_proxy(self) -> bool:
        return self.user_header is not None

    @property
    def loopback(self) -> bool:
        return is_loopback(self.address)

    def __repr__(self) -> str:  # never a token in a log line or a traceback
        return f"ConsoleSettings(address={self.address!r}, port={self.port})"


def is_loopback(address: str) -> bool:
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address.strip("[]")).is_loopback
    except ValueError:
        return False


def settings_from(
    environ: Mapping[str, str], *, address: str = DEFAULT_ADDRESS, port: int = DEFAULT_PORT
) -> ConsoleSettings:
    """The settings of `environ` and the command line, or `ConsoleSettingsError`. Pure."""
    if not 0 < port < 65536:
        raise ConsoleSettingsError(f"--port: {port} is not a TCP port (1-65535)")
    operator_token = _token(environ, TOKEN_ENV)
    read_token = _token(environ, READ_TOKEN_ENV)
    if operator_token is not None and operator_token == read_token:
        raise ConsoleSettingsError(
            f"{TOKEN_ENV} and {READ_TOKEN_ENV} are the same: a reader could act; give each its own"
        )
    user_header = _header(environ, USER_HEADER_ENV)
    role_header = _header(environ, ROLE_HEADER_ENV)
    proxies = _networks(environ.get(TRUSTED_PROXIES_ENV, ""))
    if user_header is None and (proxies or role_header):
        raise ConsoleSettingsError(
            f"{TRUSTED_PROXIES_ENV} or {ROLE_HEADER_ENV} is set without {USER_HEADER_ENV}: "
            "name the header your proxy puts the signed-in user in (e.g. X-Forwarded-User)"
        )
    if user_header is not None and not proxies:
        raise ConsoleSettingsError(
            f"{USER_HEADER_ENV} is set without {TRUSTED_PROXIES_ENV}: anyone could send that "
            "header; list the proxy's addresses (e.g. 10.0.0.5 or 10.0.0.0/24)"
        )
    made_here = False
    if operator_token is None and user_header is None:
        if not is_loopback(address):
            raise ConsoleSettingsError(
                f"--address {address} is not loopback and no one is checked: set {TOKEN_ENV} "
                f"(and {READ_TOKEN_ENV} for readers), or {USER_HEADER_ENV} with "
                f"{TRUSTED_PROXIES_ENV} behind a signing-in proxy"
            )
        operator_token, made_here = secrets.token_urlsafe(24), True
    return ConsoleSettings(
        address=address,
        port=port,
        operator_token=operator_token,
        read_token=read_token,
        token_made_here=made_here,
        user_header=user_header,
        role_header=role_header,
        trusted_proxies=proxies,
        operators=frozenset(_names(environ.get(OPERATORS_ENV, ""))),
        session_secret=_secret(environ),
        session_hours=_hours(environ),
        secure_cookie=environ.get(SECURE_COOKIE_ENV, "").strip().lower() in ("1", "true", "yes"),
    )


def settings_from_environment(address: str, port: int) -> ConsoleSettings:
    return settings_from(os.environ, address=address, port=port)


def _token(environ: Mapping[str, str], name: str) -> str | None:
    value = environ.get(name, "").strip()
    if not value:
        return None
    if len(value) < MIN_TOKEN_CHARS:
        raise ConsoleSettingsError(
            f"{name} is {len(value)} characters: use at least {MIN_TOKEN_CHARS} "
            "(e.g. python3 -c 'import secrets; print(secrets.token_urlsafe(24))')"
        )
    return value


def _header(environ: Mapping[str, str], name: str) -> str | None:
    value = environ.get(name, "").strip()
    if not value:
        return None
    if not all(c.isalnum() or c == "-" for c in value):
        raise ConsoleSettingsError(f"{name}: {value!r} is not a header name (letters, digits, -)")
    return value.lower()


def _networks(text: str) -> tuple[Network, ...]:
    found = []
    for item in _names(text):
        try:
            found.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            raise ConsoleSettingsError(
                f"{TRUSTED_PROXIES_ENV}: {item!r} is not an IP address or network "
                "(e.g. 10.0.0.5, 10.0.0.0/24, ::1)"
            ) from None
    return tuple(found)


def _names(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def _secret(environ: Mapping[str, str]) -> bytes:
    value = environ.get(SECRET_ENV, "").strip()
    if not value:
        return secrets.token_bytes(32)
    if len(value) < MIN_SECRET_CHARS:
        raise ConsoleSettingsError(
            f"{SECRET_ENV} is {len(value)} characters: use at least {MIN_SECRET_CHARS}"
        )
    return value.encode()


def _hours(environ: Mapping[str, str]) -> float:
    value = environ.get(SESSION_HOURS_ENV, "").strip()
    if not value:
        return 12.0
    try:
        hours = float(value)
    except ValueError:
        hours = -1.0
    if not 0 < hours <= 24 * 30:
        raise ConsoleSettingsError(f"{SESSION_HOURS_ENV}: {value!r} is not hours in (0, 720]")
    return hours
