"""The model spend of one adapter process, as the kit's `report_usage` takes it: cumulative
within this process (the kit's usage stream is this process; the run sums its streams).

Standard library only, Python 3.8 or newer, like the kit.

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

**Codex** reports tokens only, cumulative over its thread (restored on resume, and written to
its rollout file as each answer comes, so a kill loses none): the adapter takes the thread's
totals from the rollout and the stream, less those at this adapter's start, at the spec's
price table (`prices`: dollars per million input, cached input and output tokens).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from overnight.agent_kit.coding_agent_system import read_json, write_whole
else:  # in the sandbox: a sibling module
    from coding_agent_system import read_json, write_whole

# Dollars per input-equivalent token before the CLI says its own (Claude's list prices are
# $N/M input and $5N/M output; a cache write 1.25x input, a cache read 0.1x).
DEFAULT_CLAUDE_RATE = 5e-6
OUTPUT_WEIGHT = 5.0
CACHE_WRITE_WEIGHT = 1.25
CACHE_READ_WEIGHT = 0.1


def _n(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


class Spend:
    def __init__(self, path: str, kind: str, prices: dict[str, Any], model: str) -> None:
        self.path = path
        self.kind = kind
        self.prices = {str(k): v for k, v in prices.items() if isinstance(v, dict)}
        self.model = model
        kept = read_json(path)
        rates = kept.get("rates")
        self.rates: dict[str, float] = {
            str(k): float(v) for k, v in (rates or {}).items() if isinstance(v, (int, float))
        }
        self.processes: list[dict[str, Any]] = []
        self.messages: dict[str, dict[str, Any]] = {}  # Claude: message id -> model, usage, process
        self.sessions: dict[str, dict[str, float]] = {}  # Claude: session -> base, seen
        self.threads: dict[str, dict[str, Any]] = {}  # Codex: thread -> base, latest totals
        self.reported = (0.0, 0, 0)
        self.unpriced: set[str] = set()

    # --- Claude Code ---

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
            counts[name] = max(_n(counts.get(name)), _n(usage.get(name)))
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
                    _n(counts.get("inputTokens"))
                    + _n(counts.get("cacheReadInputTokens"))
                    + _n(counts.get("cacheCreationInputTokens"))
                )
                tokens_out += int(_n(counts.get("outputTokens")))
                equivalent = (
                    _n(counts.get("inputTokens"))
                    + OUTPUT_WEIGHT * _n(counts.get("outputTokens"))
                    + CACHE_WRITE_WEIGHT * _n(counts.get("cacheCreationInputTokens"))
                    + CACHE_READ_WEIGHT * _n(counts.get("cacheReadInputTokens"))
                )
                cost = _n(counts.get("costUSD"))
                if equivalent > 0 and cost > 0:
                    self.rates[str(model)] = cost / equivalent
            process["tokens"] = [tokens_in, tokens_out]
        session = self.sessions.get(str(process["session"]))
        if session is not None and total is not None:
            session["seen"] = max(session["seen"], total)

    def _claude_message_cost(self, model: str, usage: dict[str, Any]) -> float:
        price = self._price(model)
        fresh = _n(usage.get("input_tokens"))
        written = _n(usage.get("cache_creation_input_tokens"))
        read = _n(usage.get("cache_read_input_tokens"))
        out = _n(usage.get("output_tokens"))
        if price is not None:
            per_in = _n(price.get("input_per_mtok"))
            per_cached = _n(price.get("cached_input_per_mtok", per_in * CACHE_READ_WEIGHT))
            per_out = _n(price.get("output_per_mtok"))
            cost = fresh * per_in + written * per_in * CACHE_WRITE_WEIGHT
            return (cost + read * per_cached + out * per_out) / 1e6
        rate = self.rates.get(model, DEFAULT_CLAUDE_RATE)
        equivalent = fresh + OUTPUT_WEIGHT * out + CACHE_WRITE_WEIGHT * written
        return (equivalent + CACHE_READ_WEIGHT * read) * rate

    def _claude_total(self) -> tuple[float, int, int]:
        estimated = [0.0] * len(self.processes)
        tokens = [[0, 0] for _ in self.processes]
        for known in self.messages.values():
            index = int(known["process"])
            usage = known["usage"]
            estimated[index] += self._claude_message_cost(str(known["model"]), usage)
            tokens[index][0] += int(
                _n(usage.get("input_tokens"))
                + _n(usage.get("cache_creation_input_tokens"))
                + _n(usage.get("cache_read_input_tokens"))
            )
            tokens[index][1] += int(_n(usage.get("output_tokens")))
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

    # --- Codex ---

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

    def _codex_total(self) -> tuple[float, int, int]:
        usd = 0.0
        tokens_in = tokens_out = 0
        price = self._price(self.model)
        for known in self.threads.values():
            base, latest = known["base"], known["latest"]
            spent = {k: max(0, int(latest.get(k, 0)) - int(base.get(k, 0))) for k in latest}
            fresh_and_cached = spent.get("input_tokens", 0)
            cached = min(spent.get("cached_input_tokens", 0), fresh_and_cached)
            out = spent.get("output_tokens", 0)
            tokens_in += fresh_and_cached
            tokens_out += out
            if price is not None:
                per_in = _n(price.get("input_per_mtok"))
                per_cached = _n(price.get("cached_input_per_mtok", per_in))
                per_out = _n(price.get("output_per_mtok"))
                usd += ((fresh_and_cached - cached) * per_in + cached * per_cached) / 1e6
                usd += out * per_out / 1e6
        if price is None and (tokens_in or tokens_out):
            self.unpriced.add(self.model or "(the CLI's default model)")
        return usd, tokens_in, tokens_out

    # --- both ---

    def _price(self, model: str) -> dict[str, Any] | None:
        if model in self.prices:
            return dict(self.prices[model])
        matches = [name for name in self.prices if name and model.startswith(name)]
        return dict(self.prices[max(matches, key=len)]) if matches else None

    def total(self) -> tuple[float, int, int]:
        """(dollars, input tokens, output tokens) this process has spent, never less than
        reported before."""
        now = self._claude_total() if self.kind == "claude-code" else self._codex_total()
        before = self.reported
        self.reported = (
            round(max(before[0], now[0]), 6),
            max(before[1], now[1]),
            max(before[2], now[2]),
        )
        return self.reported

    def main_model(self) -> str:
        if self.model:
            return self.model
        models = [str(m["model"]) for m in self.messages.values() if m.get("model")]
        return max(set(models), key=models.count) if models else ""

    def save(self) -> None:
        usd, tokens_in, tokens_out = self.reported
        record = {
            "usd": usd,
            "input_tokens": tokens_in,
            "output_tokens": tokens_out,
            "processes": self.processes,
            "sessions": self.sessions,
            "threads": self.threads,
            "rates": self.rates,
            "messages": len(self.messages),
            "unpriced": sorted(self.unpriced),
        }
        try:
            write_whole(self.path, json.dumps(record, indent=1, sort_keys=True))
        except OSError:
            pass
