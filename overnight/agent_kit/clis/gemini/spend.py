"""Gemini CLI's spend, counted from its session file's answers.

**Gemini CLI** writes each model answer to its session file with that answer's tokens (input,
of which cached, output and thinking), as the answer ends, so a kill loses none; a resumed
session's earlier answers are in the file already. The adapter takes the answers this process
added (those not in the file when it started), at the spec's price table (`prices`: dollars
per million input, cached input and output tokens; thinking is billed as output).
"""

from __future__ import annotations

from typing import Any

from ..spend import Spend, number


class GeminiSpend(Spend):
    def __init__(self, path: str, prices: dict[str, Any], model: str) -> None:
        super().__init__(path, prices, model)
        self.before: set[str] = set()  # answers in the session before this process
        self.answers: dict[str, dict[str, Any]] = {}  # id -> model, tokens (this process's)

    def earlier(self, answer_id: str) -> None:
        self.before.add(answer_id)

    def answer(self, answer_id: str, model: str, tokens: dict[str, Any]) -> None:
        if answer_id in self.before:
            return
        self.answers[answer_id] = {"model": model, "tokens": dict(tokens)}

    def now(self) -> tuple[float, int, int]:
        usd = 0.0
        tokens_in = tokens_out = 0
        for answer in self.answers.values():
            tokens = answer["tokens"]
            prompt = int(number(tokens.get("input")))
            cached = min(int(number(tokens.get("cached"))), prompt)
            out = int(number(tokens.get("output"))) + int(number(tokens.get("thoughts")))
            tokens_in += prompt
            tokens_out += out
            model = str(answer["model"] or self.model)
            price = self.price(model)
            if price is None:
                self.unpriced.add(model or "(the CLI's default model)")
                continue
            per_in = number(price.get("input_per_mtok"))
            per_cached = number(price.get("cached_input_per_mtok", per_in))
            per_out = number(price.get("output_per_mtok"))
            usd += ((prompt - cached) * per_in + cached * per_cached + out * per_out) / 1e6
        return usd, tokens_in, tokens_out

    def main_model(self) -> str:
        models = [str(a["model"]) for a in self.answers.values() if a["model"]]
        return max(set(models), key=models.count) if models else self.model
