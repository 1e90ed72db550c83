"""The price table: a model's row, what a usage costs at it, and what an unpriced model is
charged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from overnight.core.model_prices import (
    DEFAULT_PRICES,
    PRICES_ENV,
    Usage,
    dearest,
    load_prices,
    price_of,
    usd_of,
)


def test_a_dated_model_is_priced_by_the_longest_row_it_starts_with() -> None:
    assert price_of(DEFAULT_PRICES, "claude-opus-4-5-20251101") == DEFAULT_PRICES["claude-opus-4-5"]
    assert price_of(DEFAULT_PRICES, "claude-opus-4-1-20250805") == DEFAULT_PRICES["claude-opus-4"]
    assert price_of(DEFAULT_PRICES, "gpt-5-mini") == DEFAULT_PRICES["gpt-5-mini"]
    assert price_of(DEFAULT_PRICES, "llama-3") is None


def test_usage_costs_each_kind_of_token_at_its_own_rate() -> None:
    usage = Usage(
        input_tokens=1_000_000,
        output_tokens=1_000_000,
        cache_read_tokens=1_000_000,
        cache_write_tokens=1_000_000,
        cache_write_1h_tokens=1_000_000,
    )
    # Sonnet 4.x: $3 in, $15 out, $0.30 read, $3.75 a 5-minute write, $6 a 1-hour write.
    assert usd_of(DEFAULT_PRICES["claude-sonnet-4"], usage) == pytest.approx(28.05)
    # A row without cache-write prices: 1.25x and 2x its input price.
    row = {"input_per_mtok": 2.0, "output_per_mtok": 8.0, "cached_input_per_mtok": 0.2}
    assert usd_of(row, usage) == pytest.approx(2 + 8 + 0.2 + 2.5 + 4)


def test_an_unpriced_model_is_charged_the_dearest_rates_of_the_table() -> None:
    row = dearest(DEFAULT_PRICES)
    assert row["input_per_mtok"] == 15.0 and row["output_per_mtok"] == 75.0
    assert row["cache_write_1h_per_mtok"] == 30.0


def test_the_workers_file_adds_rows_and_keeps_its_cache_writes_optional(tmp_path: Path) -> None:
    prices = tmp_path / "prices.json"
    prices.write_text(
        json.dumps(
            {
                "my-claude": {"input_per_mtok": 1, "output_per_mtok": 5, "cache_write_per_mtok": 2},
                "my-gpt": {"input_per_mtok": 0.5, "output_per_mtok": 1},
            }
        )
    )
    table = load_prices({PRICES_ENV: str(prices)})
    assert table["my-claude"]["cache_write_per_mtok"] == 2.0
    assert "cache_write_per_mtok" not in table["my-gpt"]
    assert table["gpt-5"] == DEFAULT_PRICES["gpt-5"]
    prices.write_text('{"m": {"cache_write_1h_per_mtok": -1}}')
    with pytest.raises(ValueError, match=f"^{PRICES_ENV}="):
        load_prices({PRICES_ENV: str(prices)})
