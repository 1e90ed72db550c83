"""Claude Code's spend, counted per CLI process.

**Claude Code** reports dollars at list prices. Its session total (`total_cost_usd`) is no
measure: it is restored on `--resume` from an entry written only at a normal exit, so the spend
of a SIGKILLed process drops out of it. So the adapter counts per CLI process:
- a process that ended with a result: what the result says it spent (`model_usage_since_last_
  result`, per model, with its tokens);
- a process killed before its result: the usage of each of its model answers, from the
  session file (final per-message usage; the stream carries only the first) else the stream,
  at the model's rate: the spec's price table when it has the model, else the rate the CLI's
  own results showed for it (dollars per input-equivalent token, learnt and kept in the spend
  file), else a list-price default.
The process's report is the larger of that sum and the CLI's own totals since this adapter
started (per session, its largest total less the total it restored from).
"""

from __future__ import annotations

from typing import Any

from ..spend import Spend, number

# Dollars per input-equivalent token before the CLI says its own (Claude's list prices are
# $N/M input and $5N/M output; a cache write 1.25x input, a cache read 0.1x).
DEFAULT_CLAUDE_RATE = 5e-6
OUTPUT_WEIGHT = 5.0
CACHE_WRITE_WEIGHT = 1.25
CACHE_READ_WEIGHT = 0.1


class ClaudeSpend(Spend):
    def __init__(self, path: str, prices: dict[str, Any], model: str) -> None:
        super().__init__(path, prices, model)
        self.processes: list[dict[str, Any]] = []
        self.messages: dict[str, dict[str, Any]] = {}  # message id -> model, usage, process
        self.sessions: dict[str, dict[str, float]] = {}  # session -> base, seen

    def process_started(self, session_id: str, restored_total: float) -> None:
        """A CLI process of `session_id` starts; the CLI will restore `restored_total`."""
        self.processes.append({"session": session_id, "cli_usd": None, "tokens": None})
        if session_id not in self.sessions:
            self.sessions[session_id] = {"base": restored_total, "seen": restored_total}

    def message(self, message_id: str, model: str, usage: dict[str, Any]) -> None:
        """A model answer of the current process (or its final usage, from the session file):
        each count the largest seen."""
        if not self.processes:
            return
        known = self.messages.get(message_id)
        if known is None:
            known = {"model": model, "usage": {}, "process": len(self.processes) - 1}
            self.messages[message_id] = known
        counts = known["usage"]
        for name in (
            "input_tokens",
            "output_tokens",
            "cache_creation_input_tokens",
            "cache_read_input_tokens",
        ):
            counts[name] = max(number(counts.get(name)), number(usage.get(name)))
        if model and model != "<synthetic>":
            known["model"] = model

    def result(self, cost_usd: float | None, total: float | None, usage: dict[str, Any]) -> None:
        """The current process's result: what it spent, its session total, per-model usage."""
        if not self.processes:
            return
        process = self.processes[-1]
        if cost_usd is not None:
            process["cli_usd"] = cost_usd
            tokens_in = tokens_out = 0
            for model, counts in usage.items():
                if not isinstance(counts, dict):
                    continue
                tokens_in += int(
                    number(counts.get("inputTokens"))
                    + number(counts.get("cacheReadInputTokens"))
                    + number(counts.get("cacheCreationInputTokens"))
                )
                tokens_out += int(number(counts.get("outputTokens")))
                equivalent = (
                    number(counts.get("inputTokens"))
                    + OUTPUT_WEIGHT * number(counts.get("outputTokens"))
                    + CACHE_WRITE_WEIGHT * number(counts.get("cacheCreationInputTokens"))
                    + CACHE_READ_WEIGHT * number(counts.get("cacheReadInputTokens"))
                )
                cost = number(counts.get("costUSD"))
                if equivalent > 0 and cost > 0:
                    self.rates[str(model)] = cost / equivalent
            process["tokens"] = [tokens_in, tokens_out]
        session = self.sessions.get(str(process["session"]))
        if session is not None and total is not None:
            session["seen"] = max(session["seen"], total)

    def _message_cost(self, model: str, usage: dict[str, Any]) -> float:
        price = self.price(model)
        fresh = number(usage.get("input_tokens"))
        written = number(usage.get("cache_creation_input_tokens"))
        read = number(usage.get("cache_read_input_tokens"))
        out = number(usage.get("output_tokens"))
        if price is not None:
            per_in = number(price.get("input_per_mtok"))
            per_cached = number(price.get("cached_input_per_mtok", per_in * CACHE_READ_WEIGHT))
            per_out = number(price.get("output_per_mtok"))
            cost = fresh * per_in + written * per_in * CACHE_WRITE_WEIGHT
            return (cost + read * per_cached + out * per_out) / 1e6
        rate = self.rates.get(model, DEFAULT_CLAUDE_RATE)
        equivalent = fresh + OUTPUT_WEIGHT * out + CACHE_WRITE_WEIGHT * written
        return (equivalent + CACHE_READ_WEIGHT * read) * rate

    def now(self) -> tuple[float, int, int]:
        estimated = [0.0] * len(self.processes)
        tokens = [[0, 0] for _ in self.processes]
        for known in self.messages.values():
            index = int(known["process"])
            usage = known["usage"]
            estimated[index] += self._message_cost(str(known["model"]), usage)
            tokens[index][0] += int(
                number(usage.get("input_tokens"))
                + number(usage.get("cache_creation_input_tokens"))
                + number(usage.get("cache_read_input_tokens"))
            )
            tokens[index][1] += int(number(usage.get("output_tokens")))
        own = 0.0
        tokens_in = tokens_out = 0
        for index, process in enumerate(self.processes):
            cli = process["cli_usd"]
            own += float(cli) if cli is not None else estimated[index]
            counted = process["tokens"] or tokens[index]
            tokens_in += int(counted[0])
            tokens_out += int(counted[1])
        cli_total = sum(max(0.0, s["seen"] - s["base"]) for s in self.sessions.values())
        return max(own, cli_total), tokens_in, tokens_out

    def main_model(self) -> str:
        if self.model:
            return self.model
        models = [str(m["model"]) for m in self.messages.values() if m.get("model")]
        return max(set(models), key=models.count) if models else ""

    def kept(self) -> dict[str, Any]:
        return {
            **super().kept(),
            "processes": self.processes,
            "sessions": self.sessions,
            "messages": len(self.messages),
        }
