"""What a done check costs in a sandbox of its own, beside the same check in the agent's:
`python -m bench.done_check_cost [--quick]`.

On each provider (local: the local engine; runtime: the runtime provider through the real SDK,
against the fake Runtime API, whose sandboxes are local ones), a 10 MB origin and an agent
sandbox made by the real create; the agent's work is a changed file and a new one. Then, per
round, `--rounds` times:

- baseline: the check (`test -f work.txt`) in the agent's sandbox (`run_done_check`), which is
  what `done_when_in_place` does and what `done_when` did before;
- overnight: what `done_when` does now: the work pushed to the run's check ref and confirmed on
  the origin from the worker, a sandbox made with a clean clone at that commit
  (`prepare_done_check`), the same check there, and that sandbox stopped.

Seconds are the activities' wall time (medians); on Runtime also the sandboxes made and the API
requests per round. Rows (group `donecheck`) go into bench/results/latest.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from temporalio.testing import ActivityEnvironment

from activities.delivery.done_checks import DoneCheckActivities
from activities.delivery.done_sandbox import DoneSandboxActivities
from activities.models import CreateSandboxInput, RunDoneCheckInput
from activities.models.done_sandbox import PrepareDoneCheckInput
from activities.providers.local import disk_image
from activities.providers.local.engine import LocalEngine
from activities.providers.local.provider import LocalProvider
from activities.providers.protocol import SandboxProvider
from activities.providers.runtime.provider import RuntimeProvider
from activities.sandbox.activities import SandboxActivities
from activities.sandbox_base.setup import APP_DIR
from bench.report import RESULTS_DIR, Row, machine, render_text, save_results
from bench.runtime_world import bench_spec, worker_env
from bench.workspace_world import make_origin
from fakes.runtime import FakeRuntime
from overnight.core.grants import Grants
from overnight.core.home import HOME_ENV
from overnight.core.models import RunSpec

CHECK = "test -f work.txt"
WORK = "echo edited >> d1/f1.bin && echo done > work.txt"


@dataclass(frozen=True)
class Plan:
    size_mib: int = 10
    rounds: int = 5


QUICK = Plan(size_mib=1, rounds=1)


@dataclass
class Measured:
    provider: str
    in_place_s: list[float]
    fresh_s: list[float]
    # The fresh round's parts: the push (and its confirmation), the sandbox made ready, the
    # check, the stop.
    push_s: list[float]
    ready_s: list[float]
    check_s: list[float]
    stop_s: list[float]
    # Runtime: API requests per round in place and fresh, and sandboxes made per fresh round.
    in_place_requests: list[int]
    fresh_requests: list[int]
    sandboxes_made: list[int]


def spec_for(root: Path, provider: str, origin: Path) -> RunSpec:
    agent = root / "sleeper"
    agent.mkdir(exist_ok=True)
    (agent / "main.py").write_text("import time\ntime.sleep(3600)\n")
    return bench_spec(
        f"checkbench-{provider[:2]}-{uuid.uuid4().hex[:6]}",
        origin,
        provider,
        agent_dir=str(agent),
        command="python3 /workspace/agent/main.py",
        done_when=[CHECK],
        sandbox_timeout_seconds=3600,
    )


@contextmanager
def environment(changes: dict[str, str | None]) -> Iterator[None]:
    before = {name: os.environ.get(name) for name in changes}
    for name, value in changes.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@asynccontextmanager
async def provider_of(
    name: str, root: Path
) -> AsyncIterator[tuple[SandboxProvider, FakeRuntime | None]]:
    """The provider `name`, and for runtime the fake it talks to (stopped afterwards)."""
    if name == "local":
        yield LocalProvider(LocalEngine(root / "home-local")), None
        return
    async with FakeRuntime.local(
        root / "home-runtime", api_key=f"check-{uuid.uuid4().hex[:6]}"
    ) as fake:
        with environment(worker_env(fake, root / "runtime-config")):
            provider = RuntimeProvider(timeout_seconds=30, max_retries=2, call_budget_seconds=120)
            try:
                yield provider, fake
            finally:
                await provider.aclose()


async def measure(name: str, root: Path, plan: Plan) -> Measured:
    origin = make_origin(root / f"repo-{name}", plan.size_mib)
    found = Measured(name, [], [], [], [], [], [], [], [], [])
    grants = Grants(writable_bind_roots=(str(root.resolve()),))
    env = ActivityEnvironment()
    async with provider_of(name, root) as (provider, fake):

        async def same(_name: str) -> SandboxProvider:
            return provider

        spec = spec_for(root, name, origin)
        checks = DoneCheckActivities(same)
        preparer = DoneSandboxActivities(same, grants=grants)
        async with SandboxActivities(providers={name: provider}, grants=grants) as acts:
            made = CreateSandboxInput(spec=spec, attempt=1, checkpoint='{"step": 0}')
            sid = (await env.run(acts.create_sandbox, made)).sandbox_id
            ran = await provider.run(sid, WORK, cwd=APP_DIR, timeout_seconds=60)
            assert ran.exit_code == 0, ran.stderr
            try:
                for n in range(1, plan.rounds + 1):
                    await _round(env, provider, fake, checks, preparer, spec, sid, n, found)
            finally:
                await provider.stop(sid)
    return found


async def _round(
    env: ActivityEnvironment,
    provider: SandboxProvider,
    fake: FakeRuntime | None,
    checks: DoneCheckActivities,
    preparer: DoneSandboxActivities,
    spec: RunSpec,
    sid: str,
    n: int,
    found: Measured,
) -> None:
    def check_input(sandbox_id: str, **fields: Any) -> RunDoneCheckInput:
        return RunDoneCheckInput(
            provider=spec.provider,
            sandbox_id=sandbox_id,
            command=CHECK,
            index=0,
            round=n,
            cwd=spec.cwd,
            timeout_seconds=60,
            **fields,
        )

    served = len(fake.served()) if fake is not None else 0
    t0 = time.perf_counter()
    in_place = await env.run(checks.run_done_check, check_input(sid))
    t1 = time.perf_counter()
    assert in_place.passed, in_place.tail
    middle = len(fake.served()) if fake is not None else 0
    given = PrepareDoneCheckInput(
        spec=spec,
        agent_sandbox_id=sid,
        number=n,
        round=n,
        at=datetime.now(UTC),
        timeout_seconds=600,
    )
    ready = await env.run(preparer.prepare_done_check, given)
    t2 = time.perf_counter()
    assert ready.sandbox_id is not None, ready.problem
    fresh = await env.run(
        checks.run_done_check,
        check_input(ready.sandbox_id, tell_sandbox_id=sid, commit=ready.commit),
    )
    t3 = time.perf_counter()
    assert fresh.passed, fresh.tail
    await provider.stop(ready.sandbox_id)
    t4 = time.perf_counter()
    found.in_place_s.append(t1 - t0)
    found.fresh_s.append(t4 - t1)
    found.push_s.append(ready.push_seconds)
    found.ready_s.append(ready.ready_seconds)
    found.check_s.append(t3 - t2)
    found.stop_s.append(t4 - t3)
    if fake is not None:
        after = fake.served()
        found.in_place_requests.append(middle - served)
        found.fresh_requests.append(len(after) - middle)
        found.sandboxes_made.append(sum(1 for s in after[middle:] if s.route == "create"))


def _median(values: list[float] | list[int]) -> float:
    return round(statistics.median(values), 3) if values else 0.0


def result_rows(found: list[Measured], plan: Plan) -> list[Row]:
    rows: list[Row] = []
    for m in found:
        where = "local" if m.provider == "local" else "runtime (fake API)"
        rows.append(
            Row(
                f"done check: seconds per round, {where}, {plan.size_mib} MB repo "
                "(baseline: in the agent's sandbox; overnight: in a fresh sandbox at the pushed "
                "work)",
                "s",
                _median(m.in_place_s),
                _median(m.fresh_s),
                note=(
                    f"fresh round's parts (medians): push and confirm {_median(m.push_s)} s, "
                    f"sandbox made and cloned {_median(m.ready_s)} s, check "
                    f"{_median(m.check_s)} s, stop {_median(m.stop_s)} s"
                ),
            )
        )
        if m.provider == "runtime":
            rows.append(
                Row(
                    "done check: Runtime sandboxes made per round (baseline: in the agent's)",
                    "sandboxes",
                    0,
                    _median(m.sandboxes_made),
                )
            )
            rows.append(
                Row(
                    "done check: Runtime API requests per round (baseline: in the agent's)",
                    "requests",
                    _median(m.in_place_requests),
                    _median(m.fresh_requests),
                )
            )
    for row in rows:
        row.group = "donecheck"
    return rows


async def measure_all(plan: Plan, root: Path) -> list[Measured]:
    return [await measure(name, root, plan) for name in ("local", "runtime")]


def clean_up(root: Path) -> None:
    """Stop every sandbox the bench left, detach their disk images, delete the scratch folder."""
    for home in root.glob("home-*"):
        engine = LocalEngine(home)
        for meta in engine.list_sandboxes(include_stopped=False):
            engine.stop(meta.id)
        disk_image.detach(home)
    shutil.rmtree(root, ignore_errors=True)


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.done_check_cost")
    parser.add_argument("--quick", action="store_true", help="one tiny round: the smoke test")
    parser.add_argument("--rounds", type=int, default=Plan.rounds)
    parser.add_argument("--results", type=Path, default=RESULTS_DIR, help="folder for latest.json")
    args = parser.parse_args(argv)
    plan = QUICK if args.quick else Plan(rounds=args.rounds)
    began, started_at = time.monotonic(), datetime.now(UTC)
    root = Path(tempfile.mkdtemp(prefix="donecheck-bench-"))
    os.environ[HOME_ENV] = str(root / "home")
    try:
        found = await measure_all(plan, root)
    finally:
        clean_up(root)
    rows = result_rows(found, plan)
    details = {"done_check_cost": [vars(m) for m in found]}
    meta = {
        "command": "python -m bench.done_check_cost" + (" --quick" if args.quick else ""),
        "machine": machine(),
        "started_at": started_at.isoformat(timespec="seconds"),
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "wall_seconds": round(time.monotonic() - began),
        "metrics": ["donecheck"],
    }
    results = args.results
    if args.quick and results == RESULTS_DIR:
        results = Path(tempfile.mkdtemp(prefix="donecheck-bench-quick-"))
    _, json_path, _ = save_results(results, rows, details, meta)
    print(json.dumps(details["done_check_cost"]))
    print(render_text(rows))
    print(f"wrote {json_path}")
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(asyncio.run(main()))
