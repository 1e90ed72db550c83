"""An error as the one line `overnight` prints for it: what went wrong and what to do, never an
exception's type name (`RPCError:`, `ValueError:`) a person has no use for. Pure.

overnight's own errors (`OvernightError` and the codec's) are written as that line already.
The Temporal server's refusals (`RPCError`) say what the server said, with the fix where one
is known; a run's failure (`WorkflowFailureError`, `start --wait`) says the run's own line.
Anything else is a bug of overnight's: its message, and how to see where it came from.
"""

from __future__ import annotations

from temporalio.client import WorkflowFailureError
from temporalio.service import RPCError, RPCStatusCode

from overnight.core.codec import CodecConfigError, CodecKeyError
from overnight.core.errors import OvernightError

# What to do about a server refusal, by its status code.
_RPC_FIXES = {
    RPCStatusCode.UNAUTHENTICATED: "check TEMPORAL_API_KEY or the TLS settings of this shell",
    RPCStatusCode.PERMISSION_DENIED: "this shell's key or certificate may not do that here",
    RPCStatusCode.DEADLINE_EXCEEDED: "the server did not answer in time: try again",
    RPCStatusCode.UNAVAILABLE: "the server is not reachable now: try again, or check --address",
    RPCStatusCode.RESOURCE_EXHAUSTED: "the server is at a limit (a rate, or a namespace's): "
    "try again in a minute",
}


def one_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    message = text[0] if text else ""
    if isinstance(err, OvernightError | CodecConfigError | CodecKeyError):
        return message or "failed"
    if isinstance(err, RPCError):
        return server_refusal(err.status, message)
    if isinstance(err, WorkflowFailureError):
        cause = err.cause
        said = getattr(cause, "message", None) or str(cause or "").strip() or message
        return f"the run failed: {said.splitlines()[0] if said else 'see overnight status'}"
    shown = message or type(err).__name__
    return f"unexpected error: {shown} (overnight --debug shows where; please report it)"


def server_refusal(status: RPCStatusCode, message: str) -> str:
    """The Temporal server's refusal as one line: what it said, and the fix where one is known."""
    said = message.rstrip(".") or f"refused ({status.name.lower()})"
    if "Blob data size exceeds limit" in message:
        return (
            f"the Temporal server refused it: {said} (a payload may be at most 2 MB): send "
            "less, and put large data in a file"
        )
    if status == RPCStatusCode.NOT_FOUND and message.startswith("Namespace"):
        return f"the Temporal server says: {said}: check --namespace or TEMPORAL_NAMESPACE"
    fix = _RPC_FIXES.get(status)
    return f"the Temporal server says: {said}" + (f": {fix}" if fix else "")
