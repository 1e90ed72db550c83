"""One worker process of `bench.runtime_fleet`: watches its share of the runs through the runtime
provider (real `withruntime` SDK, one client, its streams and its event feed), each run an
observe loop as the `observe_agent` activity runs it, until its agent has ended.

`python -m bench.runtime_fleet_worker PLAN INDEX OUT`: PLAN is the driver's JSON (the runs
of each worker, the poll, the starts per second); writes OUT (JSON) when every run ended, and
`OUT.ready` once every run had its first look. The environment points it at the fake and sets
`OVERNIGHT_RUNTIME_STREAMS` / `OVERNIGHT_RUNTIME_EVENTS_SECONDS`.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

from activities.models import ObserveInput
from activities.providers.protocol import ProviderError, WatchRequest
from activities.providers.runtime.provider import RuntimeProvider
from activities.sandbox.observe import observe

CHECKPOINT = "/workspace/checkpoint.json"
# An observe waits at most this (the workflow's quiet wake is 10 minutes).
OBSERVE_SECONDS = 600.0
RETRY_PAUSE_SECONDS = 1.0


class Fleet:
    def __init__(self, plan: dict[str, Any], runs: list[dict[str, str]]) -> None:
        self.plan = plan
        self.runs = runs
        self.provider = RuntimeProvider()
        # When each run's crash was seen, and how it was read then ("stream" or "feed").
        self.noticed: dict[str, tuple[float, str]] = {}
        self.errors: list[str] = []
        self.first_looks = 0

    def observe_input(self, run: dict[str, str], token: str | None, digest: str | None) -> Any:
        return ObserveInput(
            provider="runtime",
            sandbox_id=run["sandbox_id"],
            process_id=run["process_id"],
            checkpoint_path=CHECKPOINT,
            max_checkpoint_bytes=262144,
            known_digest=digest,
            wait_seconds=OBSERVE_SECONDS,
            check_interval_seconds=1.0,
            watch_token=token,
            report_every_seconds=float(self.plan["poll_seconds"]),
            read_money=False,
            secret_env=[],
        )

    async def first_look(self, run: dict[str, str]) -> str | None:
        while True:
            try:
                seen = await self.provider.watch(
                    WatchRequest(
                        run["sandbox_id"], run["process_id"], CHECKPOINT, token=None, wait_seconds=0
                    )
                )
                self.first_looks += 1
                return seen.token
            except ProviderError as error:
                self.errors.append(f"first look: {error}")
                await asyncio.sleep(RETRY_PAUSE_SECONDS)

    async def watch(self, run: dict[str, str], token: str | None) -> None:
        digest: str | None = None
        while True:
            try:
                seen = await observe(
                    self.provider, self.observe_input(run, token, digest), OBSERVE_SECONDS
                )
            except ProviderError as error:
                # As the activity's retry would: again, from the same token.
                self.errors.append(str(error))
                await asyncio.sleep(RETRY_PAUSE_SECONDS)
                continue
            token = seen.watch_token
            if seen.checkpoint is not None and seen.checkpoint.digest is not None:
                digest = seen.checkpoint.digest
            if seen.process_state != "running" or seen.sandbox_state != "running":
                how = self.provider.read_by.get(run["sandbox_id"], "first look")
                self.noticed[run["sandbox_id"]] = (time.time(), how)
                return


async def main(plan_file: Path, index: int, out: Path) -> None:
    plan = json.loads(plan_file.read_text())
    fleet = Fleet(plan, plan["workers"][index])
    gap = 1.0 / float(plan["starts_per_second"])
    firsts_done = asyncio.Event()

    async def run_one(run: dict[str, str]) -> None:
        token = await fleet.first_look(run)
        if fleet.first_looks == len(fleet.runs):
            firsts_done.set()
        await fleet.watch(run, token)

    tasks = []
    for run in fleet.runs:
        tasks.append(asyncio.create_task(run_one(run)))
        await asyncio.sleep(gap)
    await firsts_done.wait()
    out.with_suffix(".ready").write_text(str(time.time()))
    await asyncio.gather(*tasks)
    out.write_text(json.dumps({"noticed": fleet.noticed, "errors": fleet.errors[:50]}))
    await fleet.provider.aclose()


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])))
