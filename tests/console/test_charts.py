"""The console's SVG charts (overnight/console/charts.py), pure: well-formed SVG with an
accessible name and description, bars to scale, and every label escaped."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from overnight.console import charts

SVG = "{http://www.w3.org/2000/svg}"
HOSTILE = '<script>alert("x")</script>'


def parse(markup: str) -> ET.Element:
    return ET.fromstring(str(markup))


def test_bars_are_an_image_named_and_described_with_bars_to_scale() -> None:
    svg = parse(charts.bars("outcomes", "Runs by outcome", [("finished", 8), ("failed", 2)]))

    assert svg.get("role") == "img"
    assert svg.get("aria-labelledby") == "outcomes-title outcomes-desc"
    assert svg.find(f"{SVG}title").text == "Runs by outcome"  # type: ignore[union-attr]
    assert svg.find(f"{SVG}desc").text == "finished: 8; failed: 2"  # type: ignore[union-attr]
    widths = [float(rect.get("width", "0")) for rect in svg.iter(f"{SVG}rect")]
    assert widths[0] == 4 * widths[1]


def test_an_owner_named_script_stays_text_in_every_chart() -> None:
    drawn = [
        charts.bars("owners", "Spend by owner", [(HOSTILE, 1.5)], charts.money),
        charts.stacked_columns(
            "days", "Spend by day", ["Dec 05", HOSTILE], [(HOSTILE, [1.0, 2.0])], charts.money
        ),
        charts.bars(HOSTILE, HOSTILE, []),
    ]
    for markup in drawn:
        text = str(markup)
        assert "<script" not in text
        svg = parse(markup)  # well-formed: nothing broke out of an attribute or a text
        assert not [e for e in svg.iter() if e.tag.endswith("script")]
        texts = "".join(svg.itertext())
        assert "<script>" in texts  # shown, as text


def test_stacked_columns_stack_each_series_and_say_the_figures_in_words() -> None:
    markup = charts.stacked_columns(
        "spend",
        "Spend by day and owner",
        ["Dec 05", "Dec 06"],
        [("web", [1.0, 0.0]), ("data", [1.0, 3.0])],
        charts.money,
    )
    svg = parse(markup)
    desc = svg.find(f"{SVG}desc").text  # type: ignore[union-attr]
    assert desc == "Dec 05: $2.00 (web $1.00, data $1.00); Dec 06: $3.00 (data $3.00)"
    bars = [r for r in svg.iter(f"{SVG}rect") if r.find(f"{SVG}title") is not None]
    heights = [float(r.get("height", "0")) for r in bars]
    assert len(bars) == 3 and abs(heights[0] + heights[1] - 2 / 3 * heights[2]) < 0.5


def test_an_empty_chart_says_so() -> None:
    svg = parse(charts.bars("none", "Restarts by cause", []))
    assert "nothing in this range" in "".join(svg.itertext())
    assert svg.find(f"{SVG}desc").text == "none"  # type: ignore[union-attr]
