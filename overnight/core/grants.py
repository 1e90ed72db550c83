"""What a worker lets a spec ask for: its grants, and the decision over one spec.

Whoever can start a workflow on the task queue can write any `RunSpec` (an agent too, if it
reaches Temporal; Temporal's own access control decides who can). So the parts of a spec that
reach past its sandbox are granted by the worker, in its environment, never by the spec:

| setting | default | lets a spec ask for |
|---|---|---|
| `OVERNIGHT_ALLOW_UNISOLATED=1` | off | `isolation: "none"` (the agent runs on the host) |
| `OVERNIGHT_SECRET_ENV=A,B,GITHUB_*` | none | `secret_env` names, and a webhook's `secret_env` |
| `OVERNIGHT_BIND_ROOTS=/data:/models` | none | read-only `binds` inside these folders |
| `OVERNIGHT_WRITABLE_BIND_ROOTS=/srv/git` | none | writable `binds` inside these (read-only too) |
| `OVERNIGHT_EGRESS_ALLOW=github.com,*.pypi.org` | the package registries | `egress` names |
| `OVERNIGHT_ALLOW_OPEN_NETWORK=1` | off | `network: "open"` (every public name) |

A pattern `NAME_*` in `OVERNIGHT_SECRET_ENV` allows every name it begins, except the worker's own
(`TEMPORAL_*`, `RUNTIME_*`, `OVERNIGHT_*`), which are allowed only when listed one by one;
the payload codec's keys (`OVERNIGHT_CODEC_KEYS`) never: they open every run's history.
Never granted: a bind, a local `repo` or an `agent_dir` inside the worker's state directory
(`OVERNIGHT_HOME`: the dev server's database, every run's sandboxes), or a bind holding it.

Pure: the grants are parsed from a mapping given here, and read from the worker's environment in
one place (`activities.admission.grants`), which also resolves the paths (links) the decision
compares.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from urllib.parse import unquote, urlsplit

from pydantic import BaseModel, ConfigDict

from overnight.core.egress import (
    ALLOW_OPEN_NETWORK_ENV,
    DEFAULT_GRANTED,
    EGRESS_ADDRESSES_ENV,
    EGRESS_ALLOW_ENV,
    OPEN,
    EgressError,
    implied,
    parse_address_rules,
    parse_granted,
)
from overnight.core.egress import refusals as egress_refusals
from overnight.core.errors import OvernightError
from overnight.core.isolation import is_under
from overnight.core.models import RunSpec
from overnight.core.notify_spec import DEFAULT_SECRET_ENV
from overnight.core.provider_traits import traits
from overnight.core.runtime_model_key import copied_key_refusal

ALLOW_UNISOLATED_ENV = "OVERNIGHT_ALLOW_UNISOLATED"
SECRET_ENV_ENV = "OVERNIGHT_SECRET_ENV"
BIND_ROOTS_ENV = "OVERNIGHT_BIND_ROOTS"
WRITABLE_BIND_ROOTS_ENV = "OVERNIGHT_WRITABLE_BIND_ROOTS"
SETTINGS = (ALLOW_UNISOLATED_ENV, SECRET_ENV_ENV, BIND_ROOTS_ENV, WRITABLE_BIND_ROOTS_ENV)
# The `ApplicationError` type a run fails with when its spec asks for what its worker does not
# grant. Not `InvalidSpec`: the spec is valid (another worker may run it), and the fix is the
# worker's setting, which the one-line message names.
SPEC_REFUSED = "SpecRefused"
# Names a pattern never matches: the worker's own credentials and settings.
OWN_PREFIXES = ("TEMPORAL_", "RUNTIME_", "OVERNIGHT_")
# Never granted, even by name: an agent holding the codec's keys, or the codec server's token
# (the server decrypts for whoever shows it), could read every run's history.
NEVER_GRANTED = ("OVERNIGHT_CODEC_KEYS", "OVERNIGHT_CODEC_SERVER_TOKEN")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*_\*$")
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("", "0", "false", "no", "off")
_HOME_IS = (
    "the worker's state directory (OVERNIGHT_HOME: the dev server's database and every run's "
    "sandboxes)"
)


class BadSetting(OvernightError, ValueError):
    """A grant in the worker's environment that cannot be read: the worker does not start."""

    bad_input = True


class Grants(BaseModel):
    """What a worker's settings allow specs to ask for (nothing, by default)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    allow_unisolated: bool = False
    # Variable names, and `NAME_*` patterns.
    secret_env: tuple[str, ...] = ()
    # Absolute folders, normalised: read-only binds inside any of these or the writable ones.
    bind_roots: tuple[str, ...] = ()
    writable_bind_roots: tuple[str, ...] = ()
    # Host name patterns a spec's `egress` may ask for (overnight/core/egress.py), and whether
    # `network: "open"` may be.
    egress: tuple[str, ...] = DEFAULT_GRANTED
    allow_open_network: bool = False

    def allows_secret(self, name: str) -> bool:
        return name in self.secret_env or (
            _pattern_match(self.secret_env, name) and not name.startswith(OWN_PREFIXES)
        )

    def describe(self) -> str:
        """The grants on one line, for the worker's log."""
        return "; ".join(
            [
                f"isolation none: {'allowed' if self.allow_unisolated else 'refused'}",
                f"secret_env: {', '.join(self.secret_env) or 'none'}",
                f"binds from: {':'.join(self.bind_roots) or 'nowhere'}",
                f"writable binds from: {':'.join(self.writable_bind_roots) or 'nowhere'}",
                f"egress to: {', '.join(self.egress) or 'only the repo and model hosts'}",
                f"open network: {'allowed' if self.allow_open_network else 'refused'}",
            ]
        )

    def merged(self, more: Grants) -> Grants:
        """These grants and `more` together (a worker's settings plus what its caller adds)."""
        return Grants(
            allow_unisolated=self.allow_unisolated or more.allow_unisolated,
            secret_env=_unique([*self.secret_env, *more.secret_env]),
            bind_roots=_unique([*self.bind_roots, *more.bind_roots]),
            writable_bind_roots=_unique([*self.writable_bind_roots, *more.writable_bind_roots]),
            egress=_unique([*self.egress, *more.egress]),
            allow_open_network=self.allow_open_network or more.allow_open_network,
        )


def parse_grants(environ: Mapping[str, str]) -> Grants:
    """The grants the settings in `environ` make; `BadSetting` (one line) for one that is not
    understood, so a mistyped grant stops the worker rather than allowing or refusing quietly."""
    flag = environ.get(ALLOW_UNISOLATED_ENV, "").strip().lower()
    if flag not in _TRUE + _FALSE:
        raise BadSetting(f"{ALLOW_UNISOLATED_ENV}={flag!r}: say 1 to allow, 0 or nothing not to")
    open_flag = environ.get(ALLOW_OPEN_NETWORK_ENV, "").strip().lower()
    if open_flag not in _TRUE + _FALSE:
        raise BadSetting(
            f"{ALLOW_OPEN_NETWORK_ENV}={open_flag!r}: say 1 to allow, 0 or nothing not to"
        )
    try:
        egress = parse_granted(environ.get(EGRESS_ALLOW_ENV))
        parse_address_rules(environ.get(EGRESS_ADDRESSES_ENV, ""))
    except EgressError as error:
        raise BadSetting(str(error)) from None
    return Grants(
        egress=egress,
        allow_open_network=open_flag in _TRUE,
        allow_unisolated=flag in _TRUE,
        secret_env=_secret_names(environ.get(SECRET_ENV_ENV, "")),
        bind_roots=_roots(BIND_ROOTS_ENV, environ.get(BIND_ROOTS_ENV, "")),
        writable_bind_roots=_roots(
            WRITABLE_BIND_ROOTS_ENV, environ.get(WRITABLE_BIND_ROOTS_ENV, "")
        ),
    )


def _secret_names(value: str) -> tuple[str, ...]:
    names = [part.strip() for part in value.split(",") if part.strip()]
    for name in names:
        if name in NEVER_GRANTED:
            raise BadSetting(
                f"{SECRET_ENV_ENV}: {name} is never given to a sandbox: it decrypts every "
                "run's history"
            )
        if _PATTERN.match(name):
            if name.startswith(OWN_PREFIXES):
                raise BadSetting(
                    f"{SECRET_ENV_ENV}: {name} would name the worker's own settings and "
                    "credentials; list each of those by name"
                )
        elif not _NAME.match(name):
            raise BadSetting(
                f"{SECRET_ENV_ENV}: {name!r} is neither a variable name nor a NAME_* pattern"
            )
    return _unique(names)


def _roots(setting: str, value: str) -> tuple[str, ...]:
    roots = []
    for part in value.split(":"):
        part = part.strip()
        if not part:
            continue
        if not part.startswith("/"):
            raise BadSetting(f"{setting}: {part!r} is not an absolute path")
        roots.append(_normal(part))
    return _unique(roots)


def _unique(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


def _pattern_match(entries: Sequence[str], name: str) -> bool:
    return any(e.endswith("*") and name.startswith(e[:-1]) for e in entries)


def _normal(path: str) -> str:
    return "/" + posixpath.normpath(path).lstrip("/")


def local_repo_path(repo: str) -> str | None:
    """The folder a `repo` names on the worker (a path or a `file://` URL); None for a remote."""
    if repo.startswith("file://"):
        return unquote(urlsplit(repo).path) or None
    if "://" in repo or re.match(r"^[\w.-]+@[\w.-]+:", repo):
        return None
    return repo


def spec_paths(spec: RunSpec) -> list[str]:
    """The worker's paths a spec names (as written): what `refusals` wants resolved."""
    paths = [*([spec.agent_dir] if spec.agent_dir else []), *(bind.path for bind in spec.binds)]
    repo = local_repo_path(spec.repo)
    if repo is not None:
        paths += [repo, urlsplit(spec.repo).path] if spec.repo.startswith("file://") else [repo]
    return paths


def refusals(
    spec: RunSpec,
    grants: Grants | None,
    *,
    home: str,
    real: Mapping[str, str] | None = None,
    protected_ports: Collection[int] | Mapping[int, str] = (),
) -> list[str]:
    """What in `spec` its worker does not allow, one `field <name>: why (how to allow it)` each;
    none: the spec may run. `home` is the worker's state directory; `real` maps a path (as
    written, or a root) to what it resolves to on the worker (links followed, `~` expanded),
    and a path must pass as written and as resolved. `grants` None: the grants are not known
    (a CLI), so only what no grant allows is said. `protected_ports`: the host ports no
    sandbox may reach, each with whose it is when a mapping."""
    real = real or {}
    found: list[str] = []
    copied = copied_key_refusal(spec)  # no worker allows it: the spec must say so itself
    if copied:
        found.append(copied)
    unisolated = traits(spec.provider).worker_isolates and spec.isolation == "none"
    if grants is not None and unisolated and not grants.allow_unisolated:
        found.append(
            'field isolation: "none" (the agent runs on the worker\'s host, unisolated) is not '
            f"allowed by this worker (start the worker with {ALLOW_UNISOLATED_ENV}=1 to allow it)"
        )
    if grants is not None:
        found += _secret_refusals("secret_env", spec.secret_env, grants)
        if spec.repo_credential:
            found += _secret_refusals("repo_credential", [spec.repo_credential], grants)
        if spec.model_credential:
            found += _secret_refusals("model_credential", [spec.model_credential], grants)
        for i, hook in enumerate(spec.notify):
            if hook.secret_env and hook.secret_env != DEFAULT_SECRET_ENV:
                found += _secret_refusals(f"notify.{i}.secret_env", [hook.secret_env], grants)
    homes = _forms(home, real)
    repo = local_repo_path(spec.repo)
    if repo is not None:
        # A file:// URL's path as git may read it, encoded or not.
        for path in {repo, urlsplit(spec.repo).path} - {""}:
            if _inside(path, homes, real):
                found.append(
                    f"field repo: {_shown(path, real)} is inside {_HOME_IS}, which no "
                    "sandbox may see; clone from a repository outside it"
                )
                break
    if spec.agent_dir and _inside(spec.agent_dir, homes, real):
        found.append(
            f"field agent_dir: {_shown(spec.agent_dir, real)} is inside {_HOME_IS}, "
            "which no sandbox may see; keep the agent outside it"
        )
    for bind in spec.binds:
        found += _bind_refusals(bind.path, bind.writable, grants, homes, real)
    if grants is not None:
        found += egress_refusals(
            spec.egress,
            spec.network,
            implied_hosts=implied_names(spec),
            granted=grants.egress,
            open_allowed=grants.allow_open_network,
        )
    for port in spec.host_ports:
        if port in protected_ports:
            whose = (
                protected_ports[port]
                if isinstance(protected_ports, Mapping)
                else "the port of the Temporal server this worker talks to (or its Web UI)"
            )
            found.append(
                f"field host_ports: {port} is {whose}, which no sandbox may reach; serve what "
                "the agent needs on another port"
            )
    return found


def implied_names(spec: RunSpec) -> list[str]:
    """What the spec reaches without listing it: its repository's host, its coding agent's
    model API."""
    agent = spec.agent
    return implied(
        spec.repo, None if agent is None else agent.kind, None if agent is None else agent.base_url
    )


def allowed_names(spec: RunSpec, grants: Grants | None) -> tuple[str, ...]:
    """The names its sandboxes' network reaches (`*`: every public name): its `egress`, or
    when it lists none the worker's default list (what it grants, but for `*`), and what it
    reaches without listing (`implied_names`)."""
    if spec.network == "open":
        return (OPEN,)
    listed = spec.egress or [g for g in (grants or Grants()).egress if g != OPEN]
    return _unique([*listed, *implied_names(spec)])


def refusal_message(found: Sequence[str]) -> str:
    """The one line a refused run fails with."""
    return "spec: " + "; ".join(found)


def _secret_refusals(field: str, names: Sequence[str], grants: Grants) -> list[str]:
    refused = [name for name in dict.fromkeys(names) if not grants.allows_secret(name)]
    if not refused:
        return []
    listed = ", ".join(refused)
    be, them = ("is", "it") if len(refused) == 1 else ("are", "them")
    own = [n for n in refused if _pattern_match(grants.secret_env, n)]
    note = f"a pattern never matches a name beginning {', '.join(OWN_PREFIXES)}; " if own else ""
    return [
        f"field {field}: {listed} {be} not in this worker's allow-list ({note}start the worker "
        f"with {SECRET_ENV_ENV}={','.join(refused)} to allow {them})"
    ]


def _bind_refusals(
    path: str, writable: bool, grants: Grants | None, homes: list[str], real: Mapping[str, str]
) -> list[str]:
    shown = _shown(path, real)
    if _inside(path, homes, real):
        return [
            f"field binds: {shown} is inside {_HOME_IS}, which no sandbox may see; bind a "
            "folder outside it"
        ]
    if any(is_under(home, _forms(path, real)) for home in homes):
        return [
            f"field binds: {shown} holds {_HOME_IS}, which no sandbox may see; bind a "
            "folder beside it"
        ]
    if grants is None:
        return []
    setting, roots = (
        (WRITABLE_BIND_ROOTS_ENV, grants.writable_bind_roots)
        if writable
        else (BIND_ROOTS_ENV, (*grants.bind_roots, *grants.writable_bind_roots))
    )
    allowed = [form for root in roots for form in _forms(root, real)]
    missing = [p for p in _forms(path, real) if not is_under(p, allowed)]
    if not missing:
        return []
    kind = "writable binds" if writable else "binds"
    where = "is not inside" if len(_forms(path, real)) == 1 else "is not wholly inside"
    return [
        f"field binds: {shown}{' (writable)' if writable else ''} {where} a folder this worker "
        f"allows {kind} from (start the worker with {setting}={':'.join(missing)}, or a folder "
        "holding it, to allow it)"
    ]


def _forms(path: str, real: Mapping[str, str]) -> list[str]:
    """`path` as written (when absolute) and as resolved on the worker, normalised."""
    forms = [_normal(path)] if path.startswith("/") else []
    resolved = real.get(path)
    if resolved is not None and resolved.startswith("/"):
        forms.append(_normal(resolved))
    return list(dict.fromkeys(forms))


def _inside(path: str, homes: list[str], real: Mapping[str, str]) -> bool:
    return any(is_under(form, homes) for form in _forms(path, real))


def _shown(path: str, real: Mapping[str, str]) -> str:
    resolved = real.get(path)
    if resolved is None or _normal(resolved) == (_normal(path) if path.startswith("/") else path):
        return path
    return f"{path} (really {resolved})"
