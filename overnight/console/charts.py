"""Charts as SVG drawn on the server: no script, readable without one. Pure.

Every chart is an `<svg role="img">` named by its `<title>` and described by its `<desc>`
(which says the figures in words, for a screen reader), and each bar carries a `<title>` of
its own (a tooltip). Every text in it, an owner's name or a cause an agent's run gave, is
escaped here: an owner named `<script>` is drawn as those eight characters. Colours are
presentation attributes, not styles (the console's Content-Security-Policy forbids inline
styles). The result is `Markup`, so a template puts it in as it is.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from html import escape

from markupsafe import Markup

WIDTH = 640
BAR = 22
GAP = 8
LABEL_WIDTH = 190
LABEL_CHARS = 22
COLUMN_HEIGHT = 180
# Distinct enough side by side and for most kinds of colour blindness (Okabe-Ito), then grey.
PALETTE = (
    "#0072b2",
    "#e69f00",
    "#009e73",
    "#cc79a7",
    "#56b4e9",
    "#d55e00",
    "#f0e442",
)
OTHERS = "#999999"
Format = Callable[[float], str]


def money(value: float) -> str:
    return f"${value:,.2f}" if value >= 1 or value == 0 else f"${value:.4f}"


def hours(value: float) -> str:
    return f"{value:.1f} h"


def count(value: float) -> str:
    return f"{value:g}"


def bars(key: str, title: str, items: Sequence[tuple[str, float]], fmt: Format = count) -> Markup:
    """Horizontal bars, one per item, longest = the largest value."""
    most = max((value for _, value in items), default=0.0)
    height = max(1, len(items)) * (BAR + GAP) + GAP
    words = "; ".join(f"{label}: {fmt(value)}" for label, value in items) or "none"
    parts = [_open(key, title, words, WIDTH, height)]
    room = WIDTH - LABEL_WIDTH - 90
    for n, (label, value) in enumerate(items):
        y = GAP + n * (BAR + GAP)
        length = 0 if most <= 0 else max(1.0, room * value / most) if value > 0 else 0
        colour = PALETTE[n % len(PALETTE)]
        parts.append(
            f"<g><title>{_text(label)}: {_text(fmt(value))}</title>"
            f'<text x="{LABEL_WIDTH - 6}" y="{y + BAR * 0.7:.1f}" text-anchor="end" '
            f'font-size="13">{_text(_short(label))}</text>'
            f'<rect x="{LABEL_WIDTH}" y="{y}" width="{length:.1f}" height="{BAR}" '
            f'fill="{colour}"/>'
            f'<text x="{LABEL_WIDTH + length + 6:.1f}" y="{y + BAR * 0.7:.1f}" '
            f'font-size="13">{_text(fmt(value))}</text></g>'
        )
    if not items:
        parts.append(f'<text x="{GAP}" y="{BAR}" font-size="13">nothing in this range</text>')
    parts.append("</svg>")
    return Markup("".join(parts))


def stacked_columns(
    key: str,
    title: str,
    columns: Sequence[str],
    series: Sequence[tuple[str, Sequence[float]]],
    fmt: Format = count,
) -> Markup:
    """A column per label (days), each stacked by series (owners), with a legend below."""
    totals = [sum(values[n] for _, values in series) for n in range(len(columns))]
    most = max(totals, default=0.0)
    legend_rows = (len(series) + 2) // 3
    height = COLUMN_HEIGHT + 40 + legend_rows * 20 + GAP
    words = "; ".join(
        f"{label}: {fmt(total)}"
        + (
            " ("
            + ", ".join(f"{name} {fmt(values[n])}" for name, values in series if values[n] > 0)
            + ")"
            if total > 0
            else ""
        )
        for n, (label, total) in enumerate(zip(columns, totals, strict=True))
    )
    parts = [_open(key, title, words or "none", WIDTH, height)]
    step = (WIDTH - 2 * GAP) / max(1, len(columns))
    width = max(2.0, step * 0.7)
    for n, label in enumerate(columns):
        x = GAP + n * step + (step - width) / 2
        base = float(COLUMN_HEIGHT)
        for s, (name, values) in enumerate(series):
            value = values[n]
            if value <= 0 or most <= 0:
                continue
            tall = max(1.0, (COLUMN_HEIGHT - 20) * value / most)
            base -= tall
            parts.append(
                f'<rect x="{x:.1f}" y="{base:.1f}" width="{width:.1f}" height="{tall:.1f}" '
                f'fill="{_colour(s, name)}"><title>{_text(label)}, {_text(name)}: '
                f"{_text(fmt(value))}</title></rect>"
            )
        if len(columns) <= 16 or n % max(1, len(columns) // 8) == 0:
            parts.append(
                f'<text x="{x + width / 2:.1f}" y="{COLUMN_HEIGHT + 16}" text-anchor="middle" '
                f'font-size="11">{_text(label)}</text>'
            )
    for s, (name, _values) in enumerate(series):
        x = GAP + (s % 3) * (WIDTH / 3)
        y = COLUMN_HEIGHT + 36 + (s // 3) * 20
        parts.append(
            f'<rect x="{x:.1f}" y="{y - 11}" width="12" height="12" fill="{_colour(s, name)}"/>'
            f'<text x="{x + 18:.1f}" y="{y}" font-size="12">{_text(_short(name))}</text>'
        )
    if most <= 0:
        parts.append(
            f'<text x="{GAP}" y="{COLUMN_HEIGHT / 2:.0f}" font-size="13">'
            "nothing in this range</text>"
        )
    parts.append("</svg>")
    return Markup("".join(parts))


def top(items: dict[str, float], most: int = len(PALETTE)) -> list[str]:
    """The `most` largest keys, the rest to be shown together as `others`."""
    return sorted(items, key=lambda name: (-items[name], name))[:most]


def _open(key: str, title: str, words: str, width: int, height: int) -> str:
    slug = "".join(c if c.isalnum() else "-" for c in key)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" '
        f'viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
        f'aria-labelledby="{slug}-title {slug}-desc">'
        f'<title id="{slug}-title">{_text(title)}</title>'
        f'<desc id="{slug}-desc">{_text(words)}</desc>'
    )


def _colour(index: int, name: str) -> str:
    return OTHERS if name == "others" else PALETTE[index % len(PALETTE)]


def _short(text: str) -> str:
    return text if len(text) <= LABEL_CHARS else text[: LABEL_CHARS - 1] + "…"


def _text(text: str) -> str:
    return escape(text, quote=True)
