"""The model price table and what an answer costs at it: pure, shared by the coding-agent
adapter's config (activities/coding_agent/setup.py hands the table to the adapter) and the
gateway, which prices each answer it forwards (activities/gateway/model_routes.py).

A row is USD per million tokens: `input_per_mtok`, `output_per_mtok`, `cached_input_per_mtok`
(a cache read), and for Anthropic's prompt cache `cache_write_per_mtok` (a 5-minute write)
and `cache_write_1h_per_mtok` (a 1-hour write); the last two, when a row lacks them, are
1.25 and 2 times the input price, as Anthropic lists them. A model is priced by its own row,
else by the longest row name it starts with (`claude-sonnet-4-5-20250929` by
`claude-sonnet-4-5`). The worker's `OVERNIGHT_MODEL_PRICES` file (JSON of such rows) adds
models or replaces these.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

PRICES_ENV = "OVERNIGHT_MODEL_PRICES"
# The fields every row has (a file's row without one gets 0 for it).
PRICE_FIELDS = ("input_per_mtok", "output_per_mtok", "cached_input_per_mtok")
# Fields a row may add (Anthropic's cache writes); absent, they follow the input price.
CACHE_WRITE_FIELDS = ("cache_write_per_mtok", "cache_write_1h_per_mtok")
CACHE_WRITE_WEIGHT = 1.25
CACHE_WRITE_1H_WEIGHT = 2.0

PriceTable = dict[str, dict[str, float]]


def _claude(input_: float, output: float, cached: float) -> dict[str, float]:
    return {
        "input_per_mtok": input_,
        "output_per_mtok": output,
        "cached_input_per_mtok": cached,
        "cache_write_per_mtok": input_ * CACHE_WRITE_WEIGHT,
        "cache_write_1h_per_mtok": input_ * CACHE_WRITE_1H_WEIGHT,
    }


def _gpt(input_: float, output: float, cached: float) -> dict[str, float]:
    return {"input_per_mtok": input_, "output_per_mtok": output, "cached_input_per_mtok": cached}


# Gemini's rows have the same three fields: its cache has no writes priced per token.
_gemini = _gpt


# USD per million tokens at list prices. The Claude rows are the ones Claude Code 2.1.332
# prices its own estimate with (its model catalogue's pricing tiers); none prices the
# long-context rates some models charge past a prompt size. The Gemini rows: Google's
# "Gemini Developer API Pricing" (ai.google.dev/gemini-api/docs/pricing), read 2026-12-07 in
# quotes of it dated 2026-01 to 2026-07: the paid Standard tier, text input, prompts up to
# 200k tokens (2.5 Pro and 3 Pro charge more past that: $2.50 / $15 and $4 / $18), output
# with its thinking tokens; `cached` is the "context caching price" of a cached token read
# (the cache's storage per hour is not priced).
DEFAULT_PRICES: PriceTable = {
    "gpt-5": _gpt(1.25, 10.0, 0.125),
    "gpt-5-codex": _gpt(1.25, 10.0, 0.125),
    "gpt-5-mini": _gpt(0.25, 2.0, 0.025),
    "gpt-5.5-codex": _gpt(1.25, 10.0, 0.125),
    "claude-3-5-haiku": _claude(0.8, 4.0, 0.08),
    "claude-haiku-4-5": _claude(1.0, 5.0, 0.1),
    "claude-haiku-5-5": _claude(0.1, 0.5, 0.01),
    "claude-3-5-sonnet": _claude(3.0, 15.0, 0.3),
    "claude-3-7-sonnet": _claude(3.0, 15.0, 0.3),
    "claude-sonnet-4": _claude(3.0, 15.0, 0.3),
    "claude-sonnet-5": _claude(2.0, 10.0, 0.2),
    "claude-sonnet-5-5": _claude(2.0, 10.0, 0.1),
    "claude-opus-4": _claude(15.0, 75.0, 1.5),
    "claude-opus-4-5": _claude(5.0, 25.0, 0.5),
    "claude-opus-4-6": _claude(5.0, 25.0, 0.5),
    "claude-opus-4-7": _claude(5.0, 25.0, 0.5),
    "claude-opus-4-8": _claude(5.0, 25.0, 0.5),
    "claude-opus-5": _claude(5.0, 25.0, 0.5),
    "claude-opus-5-5": _claude(4.0, 20.0, 0.2),
    "claude-fable-5": _claude(10.0, 50.0, 1.0),
    "claude-fable-5-1": _claude(10.0, 50.0, 0.25),
    "claude-fable-5-2": _claude(8.0, 40.0, 0.2),
    "claude-mythos-5": _claude(10.0, 50.0, 1.0),
    "claude-mythos-5-1": _claude(10.0, 50.0, 0.25),
    "claude-mythos-5-2": _claude(8.0, 40.0, 0.2),
    "gemini-2.5-pro": _gemini(1.25, 10.0, 0.125),
    "gemini-2.5-flash": _gemini(0.30, 2.50, 0.03),
    "gemini-2.5-flash-lite": _gemini(0.10, 0.40, 0.01),
    "gemini-3-pro-preview": _gemini(2.0, 12.0, 0.20),
}


@dataclass(frozen=True)
class Usage:
    """One answer's tokens, each counted once: `input_tokens` not cached, `cache_read_tokens`
    read from the cache, `cache_write_tokens` / `cache_write_1h_tokens` written to it (5
    minutes / 1 hour), `output_tokens` (reasoning included)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cache_write_1h_tokens: int = 0

    def as_dict(self) -> dict[str, int]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            "cache_write_1h_tokens": self.cache_write_1h_tokens,
        }


def price_of(table: Mapping[str, Mapping[str, float]], model: str) -> dict[str, float] | None:
    """The model's row: its own, else the longest row name it starts with; None: unpriced."""
    if model in table:
        return dict(table[model])
    matches = [name for name in table if name and model.startswith(name)]
    return dict(table[max(matches, key=len)]) if matches else None


def dearest(table: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """A row of the table's highest rates, each field on its own: what an unpriced model is
    charged, so that naming a model the table lacks spends no less than any it has."""
    row: dict[str, float] = {}
    for figures in table.values():
        full = _full(figures)
        for name, value in full.items():
            row[name] = max(row.get(name, 0.0), value)
    return row


def usd_of(price: Mapping[str, float], usage: Usage) -> float:
    """What `usage` costs at `price` (one row), in USD."""
    full = _full(price)
    total = (
        usage.input_tokens * full["input_per_mtok"]
        + usage.output_tokens * full["output_per_mtok"]
        + usage.cache_read_tokens * full["cached_input_per_mtok"]
        + usage.cache_write_tokens * full["cache_write_per_mtok"]
        + usage.cache_write_1h_tokens * full["cache_write_1h_per_mtok"]
    )
    return total / 1e6


def _full(price: Mapping[str, float]) -> dict[str, float]:
    """The row with every field, the cache writes following the input price when absent."""
    per_in = float(price.get("input_per_mtok", 0.0))
    return {
        "input_per_mtok": per_in,
        "output_per_mtok": float(price.get("output_per_mtok", 0.0)),
        "cached_input_per_mtok": float(price.get("cached_input_per_mtok", 0.0)),
        "cache_write_per_mtok": float(
            price.get("cache_write_per_mtok", per_in * CACHE_WRITE_WEIGHT)
        ),
        "cache_write_1h_per_mtok": float(
            price.get("cache_write_1h_per_mtok", per_in * CACHE_WRITE_1H_WEIGHT)
        ),
    }


def load_prices(environ: Mapping[str, str]) -> PriceTable:
    """The defaults, with the worker's `OVERNIGHT_MODEL_PRICES` file over them. ValueError
    (saying the file and what is wrong) when it cannot be read."""
    path = environ.get(PRICES_ENV, "").strip()
    prices = {model: dict(figures) for model, figures in DEFAULT_PRICES.items()}
    if not path:
        return prices
    try:
        given = json.loads(Path(path).read_text(encoding="utf-8"))
        prices.update(parse_price_table(given))
    except (OSError, ValueError) as error:
        raise ValueError(f"{PRICES_ENV}={path}: {error}") from None
    return prices


def parse_price_table(given: object) -> PriceTable:
    """A price file's rows, checked: an object of models, each an object of the fields."""
    if not isinstance(given, dict):
        raise ValueError("not a JSON object of models")
    allowed = (*PRICE_FIELDS, *CACHE_WRITE_FIELDS)
    table: PriceTable = {}
    for model, figures in given.items():
        if not isinstance(figures, dict) or set(figures) - set(allowed):
            raise ValueError(f"{model}: an object of {', '.join(allowed)}")
        row: dict[str, float] = {}
        for name in allowed:
            if name not in figures and name in CACHE_WRITE_FIELDS:
                continue
            value = figures.get(name, 0.0)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"{model}.{name}: not a number")
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"{model}.{name}: not a price (>= 0)")
            row[name] = float(value)
        table[str(model)] = row
    return table
