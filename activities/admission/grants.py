"""The worker's grants, read from its environment here and nowhere else, and the check of a
spec against them (overnight/core/grants.py decides; this module supplies what it needs to know
of the machine: the settings, the state directory, where each path really leads).

Read in activities only (the workflow asks the `check_spec` activity): worker settings never
enter workflow code or history, and each worker answers for itself.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from pathlib import Path

from temporalio.exceptions import ApplicationError

from activities.admission.loopback_owners import FIXED_OWNER, OwnServices
from overnight.core.grants import (
    SPEC_REFUSED,
    Grants,
    parse_grants,
    refusal_message,
    refusals,
    spec_paths,
)
from overnight.core.home import overnight_home
from overnight.core.models import RunSpec


def worker_grants(environ: Mapping[str, str] | None = None) -> Grants:
    """The grants in the worker's environment (or `environ`); `BadSetting` when one cannot be
    read, so the worker does not start on a grant it misunderstands."""
    return parse_grants(os.environ if environ is None else environ)


def spec_refusals(
    spec: RunSpec,
    grants: Grants | None,
    home: Path | None = None,
    protected_ports: Collection[int] = (),
) -> list[str]:
    """What in `spec` this worker does not allow (none: it may run), checked as written and as
    the paths really lead on this machine (links followed) right now. `grants` None: only what
    no worker allows (the state directory)."""
    state_dir = home or overnight_home()
    roots = [] if grants is None else [*grants.bind_roots, *grants.writable_bind_roots]
    named = [str(state_dir), *spec_paths(spec), *roots]
    real = {path: _resolved(path) for path in named}
    owners = {port: FIXED_OWNER for port in protected_ports}
    if isinstance(protected_ports, OwnServices) and spec.host_ports:
        # Looked up now, from the sockets: the servers may have moved since the worker began.
        owners = protected_ports.owners(spec.host_ports) | owners
    return refusals(spec, grants, home=str(state_dir), real=real, protected_ports=owners)


def unset_secrets(
    spec: RunSpec, grants: Grants | None, environ: Mapping[str, str] | None = None
) -> list[str]:
    """The spec's `secret_env` names this worker allows but its environment does not set, one
    refusal each (at the run's start: a create would fail on them). A name it does not allow
    is left to `refusals`, which names the setting that would."""
    source = os.environ if environ is None else environ
    named = [("secret_env", name) for name in dict.fromkeys(spec.secret_env)]
    if spec.model_credential and spec.model_credential not in spec.secret_env:
        named.append(("model_credential", spec.model_credential))
    unset = [
        (field, name)
        for field, name in named
        if (grants is None or grants.allows_secret(name)) and name not in source
    ]
    return [
        f"field {field}: {name} is not set in this worker's environment (set it where the "
        "worker runs, then start the run again)"
        for field, name in unset
    ]


def refuse_unless_allowed(
    spec: RunSpec, grants: Grants, protected_ports: Collection[int] = ()
) -> None:
    """Raise the run's non-retryable `SpecRefused` error when `spec` asks for what this worker
    does not grant."""
    found = spec_refusals(spec, grants, protected_ports=protected_ports)
    if found:
        raise ApplicationError(refusal_message(found), type=SPEC_REFUSED, non_retryable=True)


def own_loopback_ports(target_host: str | None) -> OwnServices:
    """The worker's own loopback services a sandbox must never be given: as a set, the port of
    the Temporal server it talks to, when that is on this machine's loopback, and the dev
    server's Web UI beside it (its port + 1000); at each check of a spec with `host_ports`,
    every port the Temporal server, this worker or overnight's other services listen on,
    found from their sockets (activities/admission/loopback_owners.py)."""
    return OwnServices(target_host)


def _resolved(path: str) -> str:
    return os.path.realpath(os.path.expanduser(path))
