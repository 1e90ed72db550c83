"""The model spend of one adapter process, as the kit's `report_usage` takes it: cumulative
within this process (the kit's usage stream is this process; the run sums its streams).

`Spend` is what every kind shares: the spec's price table (`prices`: dollars per million
input, cached input and output tokens, matched by the longest model-name prefix), a report
that never goes down, and the spend file kept for the next process. A kind counts its own
way (`now`): Claude Code from its results and model answers (clis/claude_code.py), Codex from
its thread's token totals (clis/codex.py).

Standard library only, Python 3.8 or newer, like the kit.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from overnight.agent_kit.coding_agent_system import read_json, write_whole
else:  # in the sandbox: a module of the kit, beside this package
    from coding_agent_system import read_json, write_whole


def number(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


class Spend:
    def __init__(self, path: str, prices: dict[str, Any], model: str) -> None:
        self.path = path
        self.prices = {str(k): v for k, v in prices.items() if isinstance(v, dict)}
        self.model = model
        kept = read_json(path) if path else {}
        rates = kept.get("rates")
        # Dollars per input-equivalent token a model's CLI showed (Claude Code): kept.
        self.rates: dict[str, float] = {
            str(k): float(v) for k, v in (rates or {}).items() if isinstance(v, (int, float))
        }
        self.reported = (0.0, 0, 0)
        self.unpriced: set[str] = set()

    def now(self) -> tuple[float, int, int]:
        """(dollars, input tokens, output tokens) as this kind counts them now."""
        return self.reported

    def price(self, model: str) -> dict[str, Any] | None:
        if model in self.prices:
            return dict(self.prices[model])
        matches = [name for name in self.prices if name and model.startswith(name)]
        return dict(self.prices[max(matches, key=len)]) if matches else None

    def total(self) -> tuple[float, int, int]:
        """(dollars, input tokens, output tokens) this process has spent, never less than
        reported before."""
        now = self.now()
        before = self.reported
        self.reported = (
            round(max(before[0], now[0]), 6),
            max(before[1], now[1]),
            max(before[2], now[2]),
        )
        return self.reported

    def main_model(self) -> str:
        return self.model

    def kept(self) -> dict[str, Any]:
        """What this kind keeps in the spend file beside the totals."""
        return {"rates": self.rates}

    def save(self) -> None:
        usd, tokens_in, tokens_out = self.reported
        record = {
            "usd": usd,
            "input_tokens": tokens_in,
            "output_tokens": tokens_out,
            "unpriced": sorted(self.unpriced),
            **self.kept(),
        }
        try:
            write_whole(self.path, json.dumps(record, indent=1, sort_keys=True))
        except OSError:
            pass
