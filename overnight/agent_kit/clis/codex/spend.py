"""Codex's spend, counted from its thread's token totals.

**Codex** reports tokens only, cumulative over its thread (restored on resume, and written to
its rollout file as each answer comes, so a kill loses none): the adapter takes the thread's
totals from the rollout and the stream, less those at this adapter's start, at the spec's
price table (`prices`: dollars per million input, cached input and output tokens).
"""

from __future__ import annotations

from typing import Any

from ..spend import Spend, number


class CodexSpend(Spend):
    def __init__(self, path: str, prices: dict[str, Any], model: str) -> None:
        super().__init__(path, prices, model)
        self.threads: dict[str, dict[str, Any]] = {}  # thread -> base, latest totals

    def thread_totals(self, thread: str, totals: dict[str, int], new: bool) -> None:
        """The thread's token counts now (cumulative over the thread). The first counts of a
        thread this adapter did not start are its base: spent before this process."""
        known = self.threads.get(thread)
        if known is None:
            base = {k: 0 for k in totals} if new else dict(totals)
            known = {"base": base, "latest": dict(base)}
            self.threads[thread] = known
        latest = known["latest"]
        for name, value in totals.items():
            latest[name] = max(int(latest.get(name, 0)), int(value))

    def now(self) -> tuple[float, int, int]:
        usd = 0.0
        tokens_in = tokens_out = 0
        price = self.price(self.model)
        for known in self.threads.values():
            base, latest = known["base"], known["latest"]
            spent = {k: max(0, int(latest.get(k, 0)) - int(base.get(k, 0))) for k in latest}
            fresh_and_cached = spent.get("input_tokens", 0)
            cached = min(spent.get("cached_input_tokens", 0), fresh_and_cached)
            out = spent.get("output_tokens", 0)
            tokens_in += fresh_and_cached
            tokens_out += out
            if price is not None:
                per_in = number(price.get("input_per_mtok"))
                per_cached = number(price.get("cached_input_per_mtok", per_in))
                per_out = number(price.get("output_per_mtok"))
                usd += ((fresh_and_cached - cached) * per_in + cached * per_cached) / 1e6
                usd += out * per_out / 1e6
        if price is None and (tokens_in or tokens_out):
            self.unpriced.add(self.model or "(the CLI's default model)")
        return usd, tokens_in, tokens_out

    def kept(self) -> dict[str, Any]:
        return {**super().kept(), "threads": self.threads}
