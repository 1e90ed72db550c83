"""The run page's pictures, laid out: the timeline (overnight/console/timeline.py) and the
budget bars, as shapes with coordinates, CSS classes and texts. Pure.

The templates draw the shapes as inline SVG (`templates/_timeline.html`, `_budget.html`):
every text goes through Jinja's autoescape there, so a label holding an agent's words is
text in a `<title>` or `<text>`, never markup. Colours are CSS classes (`static/run.css`):
the Content-Security-Policy forbids style attributes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from overnight.console.timeline import Timeline
from overnight.core.models import RunStatus

WIDTH = 960
LEFT = 90  # room for the lanes' names
RIGHT = 16
AXIS_Y = 18
LANES = {"attempt": 30, "hold": 62}
LANE_HEIGHT = 24
MOMENT_Y = 100
HEIGHT = 132
# A label is written inside its shape when about this many pixels a character fit.
CHAR_PX = 7
LABEL_CHARS = 60
# Tick steps, the smallest first: the first giving at most `MAX_TICKS` ticks is used.
_STEPS = (
    [timedelta(seconds=n) for n in (1, 2, 5, 10, 30)]
    + [timedelta(minutes=n) for n in (1, 5, 15, 30)]
    + [timedelta(hours=n) for n in (1, 2, 3, 6, 12, 24, 48, 168)]
)
MAX_TICKS = 8


@dataclass(frozen=True)
class Box:
    x: float
    y: float
    width: float
    height: float
    css: str
    title: str
    text: str = ""


@dataclass(frozen=True)
class Dot:
    x: float
    y: float
    css: str
    title: str


@dataclass(frozen=True)
class Tick:
    x: float
    text: str


@dataclass(frozen=True)
class TimelineDrawing:
    width: int
    height: int
    left: int
    lanes: list[tuple[str, float]]
    ticks: list[Tick]
    boxes: list[Box]
    dots: list[Dot]
    summary: str


def draw_timeline(timeline: Timeline, width: int = WIDTH) -> TimelineDrawing:
    span = max((timeline.end - timeline.start).total_seconds(), 1.0)
    inner = width - LEFT - RIGHT

    def x_of(at: datetime) -> float:
        seconds = (at - timeline.start).total_seconds()
        return round(LEFT + inner * min(max(seconds / span, 0.0), 1.0), 1)

    boxes = []
    for item in timeline.spans:
        x = x_of(item.start)
        w = max(x_of(item.end) - x, 3.0)
        going = " going" if item.still_going else ""
        until = "now" if item.still_going else _when(item.end)
        title = f"{item.label} ({_when(item.start)} to {until})"
        fits = int(w // CHAR_PX) - 1
        text = _clip(item.label, min(fits, LABEL_CHARS)) if fits >= 6 else ""
        css = f"tl-{item.lane} tl-{item.kind}{going}"
        boxes.append(Box(x, LANES[item.lane], w, LANE_HEIGHT, css, title, text))
    dots = [
        Dot(x_of(m.at), MOMENT_Y, f"tl-moment tl-{m.kind}", f"{_when(m.at)}: {m.label}")
        for m in timeline.moments
    ]
    attempts = sum(1 for s in timeline.spans if s.lane == "attempt")
    held = sum(1 for s in timeline.spans if s.lane == "hold")
    summary = (
        f"timeline from {_when(timeline.start)} to {_when(timeline.end)}: {attempts} attempt(s), "
        f"{held} time(s) held, {len(timeline.moments)} event(s)"
    )
    return TimelineDrawing(
        width=width,
        height=HEIGHT,
        left=LEFT,
        lanes=[("attempts", LANES["attempt"]), ("held", LANES["hold"]), ("events", MOMENT_Y - 12)],
        ticks=_ticks(timeline.start, timeline.end, x_of),
        boxes=boxes,
        dots=dots,
        summary=summary,
    )


def _ticks(start: datetime, end: datetime, x_of: Callable[[datetime], float]) -> list[Tick]:
    span = end - start
    step = next((s for s in _STEPS if span / s <= MAX_TICKS), _STEPS[-1])
    first = datetime.fromtimestamp(
        (start.timestamp() // step.total_seconds() + 1) * step.total_seconds(), start.tzinfo
    )
    long = span > timedelta(days=1)
    ticks: list[Tick] = []
    at = first
    while at <= end and len(ticks) <= MAX_TICKS:
        ticks.append(Tick(x_of(at), f"{at:%m-%d %H:%M}" if long else f"{at:%H:%M:%S}"))
        at += step
    return ticks


def _when(at: datetime) -> str:
    return f"{at:%Y-%m-%d %H:%M:%S} UTC"


def _clip(text: str, most: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= most else text[: max(most - 1, 0)] + "…"


@dataclass(frozen=True)
class Bar:
    """One budget as a bar: what is used of how much (`limit` None: no limit set)."""

    name: str
    used: float
    limit: float | None
    used_text: str
    limit_text: str
    # The filled part's width, 0 to 1, and whether it is near or past the limit.
    fraction: float
    css: str


def budget_bars(status: RunStatus) -> list[Bar]:
    """Spend, hours, restarts, waiting hours and done-check rounds against their budgets."""
    b = status.budget
    rows: list[tuple[str, float, float | None, Callable[[float], str]]] = [
        ("spend", status.spend_usd, b.max_spend_usd, _usd),
        ("hours", status.hours_used, b.max_hours, _hours),
        ("restarts", float(status.restarts_used), float(b.max_restarts), _count),
        ("waiting", status.wait_hours_used, b.max_wait_hours, _hours),
        ("done checks", float(status.done_checks_used), float(b.max_done_checks), _count),
    ]
    return [_bar(name, used, limit, say) for name, used, limit, say in rows]


def _bar(name: str, used: float, limit: float | None, say: Callable[[float], str]) -> Bar:
    if limit is None:
        return Bar(name, used, None, say(used), "no limit", 0.0, "bar-none")
    fraction = 1.0 if limit <= 0 else min(used / limit, 1.0)
    css = "bar-over" if used >= limit else "bar-near" if fraction >= 0.8 else "bar-ok"
    return Bar(name, used, limit, say(used), say(limit), round(fraction, 4), css)


def _usd(value: float) -> str:
    return f"${value:,.4f}" if value < 1 else f"${value:,.2f}"


def _hours(value: float) -> str:
    return f"{value:.2f} h"


def _count(value: float) -> str:
    return f"{value:.0f}"
