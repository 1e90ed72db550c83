"""The coding-agent adapter's waits (`coding_agent.py`), between one CLI process and the next:
a usage limit (the kit's `wait_until` its reset, the sandbox paused; without a reset time, the
configured backoff), a model API error after the CLI's own retries (the backoff steps), a CLI
that failed again at once. Each is said in the checkpoint's `next`, refreshed each minute; a
wait the model API asked for counts as no stall (`waited_as_told`).

Standard library only, Python 3.8 or newer, like the kit.
"""

from __future__ import annotations

import datetime as _dt
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from overnight.agent_kit import clis
    from overnight.agent_kit import overnight_agent as kit
    from overnight.agent_kit.coding_agent_record import AdapterRecord, Outcome
else:  # in the sandbox: sibling modules
    import clis
    import overnight_agent as kit
    from coding_agent_record import AdapterRecord


def utc_clock(epoch: float, seconds: bool = False) -> str:
    moment = _dt.datetime.fromtimestamp(epoch, _dt.timezone.utc)  # noqa: UP017 (Python 3.8)
    return moment.strftime("%H:%M:%S" if seconds else "%H:%M")


class Waits(AdapterRecord):
    """The waits before the same session is resumed."""

    def wait_for_limit(self, outcome: Outcome, hits: int) -> None:
        resets = outcome.resets_at
        now = time.time()
        session = self.session_id
        if resets is not None and resets > now + 1:
            stamp = utc_clock(resets)
            self.note(f"usage limit: waiting until {stamp} UTC, then resuming session {session}")
            self.waited_as_told()
            self.save(f"usage limit: waiting until {stamp} UTC")
            self.log("usage_limit", resets_at=resets)
            came = kit.wait_until(resets, f"{self.config.kind} usage limit resets at {stamp} UTC")
            if not came:
                self.note("woken before the usage limit's reset: resuming")
        else:
            delay = self.config.usage_backoff_seconds
            until = now + delay
            self.note(
                f"usage limit with no reset time: retrying at {utc_clock(until)} UTC"
                f" ({clis.clip(outcome.text, 120)})"
            )
            self.log("usage_limit", resets_at=None, retry_at=until)
            self.sleep(delay, "usage limit: retrying at {at} UTC", until, as_told=True)
        if hits > 1:  # limited again at once: do not hammer the API
            floor = min(self.config.usage_backoff_seconds, 5.0 * 2 ** (hits - 2))
            self.sleep(
                floor, "usage limit again: retrying at {at} UTC", time.time() + floor, as_told=True
            )

    def back_off(self, outcome: Outcome, failures: int) -> None:
        steps = self.config.api_backoff_seconds
        delay = steps[min(failures - 1, len(steps) - 1)]
        until = time.time() + delay
        status = outcome.status or "error"
        self.note(
            f"model API {status} after the CLI's own retries: resuming session "
            f"{self.session_id} at {utc_clock(until, True)} UTC"
        )
        self.log("api_backoff", status=outcome.status, seconds=delay)
        self.sleep(
            delay,
            f"model API {status}: resuming at {{at}} UTC",
            until,
            seconds_shown=True,
            as_told=outcome.status is not None,  # it answered; None: it could not be reached
        )

    def after_failure(self, outcome: Outcome, failures: int) -> None:
        during = f" during {outcome.during}" if outcome.during else ""
        ended = f"; ended what it left: {', '.join(outcome.leftovers)}" if outcome.leftovers else ""
        what = "crashed" if outcome.kind == "crash" else "failed"
        self.note(
            f"the CLI {what} ({clis.clip(outcome.text, 160)}){during}{ended}; "
            f"resuming session {self.session_id}"
        )
        if failures > 1:  # again at once: the backoff steps of an API error
            steps = self.config.api_backoff_seconds
            delay = steps[min(failures - 2, len(steps) - 1)]
            self.sleep(delay, "the CLI failed again: resuming at {at} UTC", time.time() + delay)

    def sleep(
        self,
        seconds: float,
        status: str,
        until: float,
        seconds_shown: bool = False,
        as_told: bool = False,
    ) -> None:
        """Sleep `seconds`, saying `status` (with {at}) in `next`, refreshed each minute;
        `as_told`: a wait the model API asked for (`waited_as_told`)."""
        shown = seconds_shown or seconds < 120
        deadline = time.monotonic() + seconds
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            text = status.format(at=utc_clock(until, shown))
            if left > 90:
                text += f" ({int(left // 60)} min left)"
            if as_told:
                self.waited_as_told()
            self.save(text)
            time.sleep(min(left, 60.0))
