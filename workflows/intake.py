"""What an AgentRun accepts as input: the spec (`overnight.intake`) and the state a continued
run carries. Pure (no temporalio): input that does not validate is refused with one line, so
the workflow can fail at once as `InvalidSpec` instead of failing its task forever.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from overnight.intake import InvalidInput, accept_spec, derive_run_id
from overnight.specs import describe_errors
from workflows.state import SupervisorState

__all__ = ["InvalidInput", "accept_carried", "accept_spec", "derive_run_id"]


def accept_carried(raw: Any) -> SupervisorState:
    """The state a continued run carries (continue-as-new), validated."""
    try:
        return SupervisorState.model_validate(raw)
    except ValidationError as err:
        raise InvalidInput(describe_errors(err, "carried state", SupervisorState)) from None
