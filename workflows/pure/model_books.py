"""The run's model spend as the worker's gateway booked it (docs/gateway.md): the figure its
budget counts once its calls go through a gateway, the cap each host's gateway holds it to,
and what its status says of the model API.

Each host's gateway keeps its own books of the run (a ledger on that host's disk); the run
keeps the latest figure of each and counts their sum. The agent's own report (the kit's
`report_usage`, the adapter's) stays beside it as a cross-check only.
"""

from __future__ import annotations

from datetime import datetime

from activities.models import GatewayBooks
from workflows.pure import kit_requests
from workflows.pure.state import SupervisorState

# The agent's report and the gateway's figure differ by more than this share: said in the status.
DIFFERENCE_SHOWN = 0.05
# An upstream error this recent is said in the status.
UPSTREAM_ERROR_SHOWN_SECONDS = 300
# The same model request this many times in a row is a loop, seen from outside the sandbox
# (beside the adapter's count of the same tool call, which the agent's own code could fool).
GATEWAY_LOOP_REPEATS = 8
GATEWAY_LOOP_REASON = "model loop"


def host_key(state: SupervisorState) -> str:
    """The current sandbox's host queue ("": any worker reaches it, a run's one worker)."""
    if state.sandbox_id is None:
        return ""
    return state.hosts.sandbox_hosts.get(state.sandbox_id, "")


def take_books(state: SupervisorState, books: GatewayBooks | None) -> None:
    """Keep what the current sandbox's host's gateway booked (its figure only grows: an older
    answer, a retried look's, never lowers it)."""
    if books is None or not state.money.gateway_metered:
        return
    key = host_key(state)
    known = state.money.gateway_books.get(key)
    if known is not None and known.usd > books.usd:
        books = books.model_copy(update={"usd": known.usd, "answers": known.answers})
    state.money.gateway_books[key] = books


def news(state: SupervisorState, books: GatewayBooks | None) -> bool:
    """Whether a look's books are news to the run (read before `take_books`): the look came
    back early for them, so it is no quiet look."""
    return books is not None and state.money.gateway_metered and books.news_beside(known(state))


def known(state: SupervisorState) -> GatewayBooks | None:
    """What the run knows of the current sandbox's host's books (None: nothing yet)."""
    return state.money.gateway_books.get(host_key(state)) if state.money.gateway_metered else None


def gateway_usd(state: SupervisorState) -> float:
    return sum(books.usd for books in state.money.gateway_books.values())


def model_spend_usd(state: SupervisorState) -> float:
    """The model spend the budget counts: the gateway's, once the run's calls go through one;
    else what the agent reported."""
    if state.money.gateway_metered:
        return gateway_usd(state)
    return kit_requests.model_usd(state)


def allowance_usd(state: SupervisorState, sandbox_usd: float) -> float | None:
    """What the run may spend on model calls in all: its spend budget less what its sandboxes
    cost (None: no spend budget)."""
    cap = state.budget.max_spend_usd
    return None if cap is None else max(0.0, cap - sandbox_usd)


def booked_by_host(state: SupervisorState) -> dict[str, float]:
    return {host: books.usd for host, books in state.money.gateway_books.items()}


def cap_due(state: SupervisorState) -> bool:
    """The spend budget changed since the gateway's cap was set from it (an extension)."""
    return (
        state.money.gateway_metered and state.money.model_cap_budget != state.budget.max_spend_usd
    )


def reported_apart(state: SupervisorState) -> float | None:
    """The agent's own report when it differs from the gateway's figure by more than
    DIFFERENCE_SHOWN (None: no gateway, or close enough)."""
    if not state.money.gateway_metered:
        return None
    reported, booked = kit_requests.model_usd(state), gateway_usd(state)
    if abs(reported - booked) <= DIFFERENCE_SHOWN * max(reported, booked, 0.01):
        return None
    return reported


def upstream_line(state: SupervisorState, now: datetime) -> str | None:
    """The model API's trouble, as the gateway retried it ("model API: 529 at 03:12 UTC,
    4 retries at the gateway"); None when nothing recent."""
    latest: GatewayBooks | None = None
    for books in state.money.gateway_books.values():
        if books.last_upstream_error_at is None:
            continue
        if latest is None or books.last_upstream_error_at > (latest.last_upstream_error_at or 0):
            latest = books
    if latest is None or latest.last_upstream_error_at is None:
        return None
    if now.timestamp() - latest.last_upstream_error_at > UPSTREAM_ERROR_SHOWN_SECONDS:
        return None
    at = datetime.fromtimestamp(latest.last_upstream_error_at, tz=now.tzinfo)
    retries = sum(books.retries for books in state.money.gateway_books.values())
    return (
        f"model API: {latest.last_upstream_error} at {at:%H:%M} UTC, "
        f"{retries} retr{'y' if retries == 1 else 'ies'} at the gateway"
    )


def loop_seen(state: SupervisorState) -> str | None:
    """The restart reason when the current host's gateway saw the same request body
    GATEWAY_LOOP_REPEATS times in a row, not yet acted on (None: no such loop)."""
    books = known(state)
    if books is None or books.repeats < GATEWAY_LOOP_REPEATS or not books.last_body:
        return None
    if books.last_body == state.money.gateway_loop_acted:
        return None
    return (
        f"{GATEWAY_LOOP_REASON}: the same model request {books.repeats} times in a row "
        "(counted at the gateway)"
    )


def mark_loop_acted(state: SupervisorState, reason: str) -> None:
    """A restart for a loop seen at the gateway: that body's repeats are not acted on again."""
    books = known(state)
    if books is not None and reason.startswith(GATEWAY_LOOP_REASON):
        state.money.gateway_loop_acted = books.last_body
