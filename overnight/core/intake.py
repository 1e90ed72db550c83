"""What a run accepts as its spec, from any client: validation and the derived run id.

Pure (no temporalio). A spec that does not validate is refused with one line
naming every wrong field, in the CLI's wording, so the workflow can fail at once as
`InvalidSpec` instead of failing its task forever.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from pydantic import ValidationError

from overnight.core.models import RunSpec
from overnight.core.specs import describe_errors

_NOT_ALLOWED = re.compile(r"[^a-z0-9-]+")
_RUN_ID = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
HASH_CHARS = 8


class InvalidInput(ValueError):
    """The run's input cannot be used; the message is one line for a person."""


def derive_run_id(workflow_id: str) -> str:
    """A run id (sandbox name and label) from a workflow id: the id itself when it is valid,
    else lowercased, other characters turned to `-`, cut to length, with a short hash of the
    whole id so two ids never share one."""
    if _RUN_ID.match(workflow_id):
        return workflow_id
    base = _NOT_ALLOWED.sub("-", workflow_id.lower()).strip("-") or "run"
    digest = hashlib.sha256(workflow_id.encode()).hexdigest()[:HASH_CHARS]
    return f"{base[: 62 - HASH_CHARS].rstrip('-')}-{digest}"


def accept_spec(raw: Any, workflow_id: str, *, require_match: bool = True) -> RunSpec:
    """The run's spec: validated, its run id taken from the workflow id when omitted, and
    (`require_match`) refused when a given one names another run."""
    if isinstance(raw, RunSpec):
        raw = raw.model_dump(exclude_unset=True)
    if not isinstance(raw, dict):
        raise InvalidInput(f"spec: a spec is a JSON object, got {type(raw).__name__}")
    given = raw.get("run_id", "")
    if given in ("", None):
        raw = {**raw, "run_id": derive_run_id(workflow_id)}
    try:
        spec = RunSpec.model_validate(raw)
    except ValidationError as err:
        raise InvalidInput(describe_errors(err, "spec")) from None
    if require_match and spec.run_id != workflow_id and given not in ("", None):
        raise InvalidInput(
            f"spec: field run_id: {spec.run_id!r} must match the workflow id {workflow_id!r} "
            "(or be left out, to be taken from it)"
        )
    return spec
