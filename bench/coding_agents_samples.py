"""One sample of `bench.coding_agents`: the real CLI in bubblewrap against the fake model,
SIGKILLed during the crash call once its session file records it, then brought back
overnight's way (the adapter resumes the same session, or the bench resumes it as the adapter
does) or the naive way (the task run again from scratch); what it cost, read from the fake's
requests. Apart from the whole run's loop and from the rows it feeds."""

from __future__ import annotations

import os
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from bench.coding_agents_task import TASK, TaskModel, cost
from fakes.model_api import FakeModelApi, RecordedRequest
from overnight.core.agent_kinds import AgentCli, agent_cli
from tests.agent_clis.clis import Driver, Running, executable_name
from tests.agent_clis.sandbox import Sandbox, bubblewrap_works
from tests.kinds import KIND_FACTS

ResumeBy = Literal["adapter", "cli"]
Way = Literal["overnight", "naive"]


@dataclass
class Sample:
    kind: str
    way: Way
    resume_by: str  # how overnight's way resumed ("adapter", "cli"); "" for the naive loop
    calls: int
    crash_at: int
    requests: int
    redone: int  # requests beyond the calls + 1 of a clean run
    back_seconds: float  # SIGKILL -> the next CLI's first model request
    caught_up_seconds: float  # SIGKILL -> the request that asks for the killed call again
    lost_input_tokens: int
    lost_output_tokens: int
    lost_usd: float
    clean_usd: float  # what the N + 1 requests not redone cost (a clean run, about)
    sessions: int
    finished: bool
    notes: list[str] = field(default_factory=list)
    # overnight's adapter: seconds from the SIGKILL to its log's `cli_ended` (the dead CLI's
    # end handled: leftovers ended, session stored, checkpoint saved) and `cli_started` (the
    # resume begun); the rest of `back_seconds` is the CLI's own start.
    stages: dict[str, float] = field(default_factory=dict)


class BenchError(Exception):
    """A sample could not be measured (its CLI did not behave as the bench needs)."""


def _wait(probe: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(0.01)
    raise BenchError(f"not in {timeout:g} s: {what}")


def _wait_for_call_running(
    fake: FakeModelApi, model: TaskModel, driver: Driver, tree: Any, before: int
) -> str:
    """Wait until the crash call runs (its sleep is up) and the CLI's session file records it
    (see bench/coding_agents.py); its call id. `before`: the requests of earlier processes."""

    def asked() -> RecordedRequest | None:
        for request in fake.answered():
            answer = model.answer_of(request.number)
            if request.number > before and answer and answer.call == model.crash_at:
                return request
        return None

    request = _wait(asked, 120, f"call {model.crash_at} asked for")
    call_id = request.call_ids[0]
    _wait(
        lambda: (
            driver.session_mentions(call_id) and "sleep" in [executable_name(pid) for pid in tree()]
        ),
        60,
        f"call {model.crash_at} running and in the session file",
    )
    return str(call_id)


def _summarize(
    kind: str,
    way: Way,
    resume_by: str,
    model: TaskModel,
    fake: FakeModelApi,
    killed_at: float,
    finished: bool,
    notes: list[str],
) -> Sample:
    requests = fake.requests()
    after = [r for r in requests if r.received_at >= killed_at]
    if not after:
        raise BenchError("no model request after the kill")
    again = [
        r
        for r in after
        if (a := model.answer_of(r.number)) is not None and a.call == model.crash_at
    ]
    answered = list(model.answered)
    redone = [a for a in answered if a.redone]
    lost_in = sum(a.input_tokens for a in redone)
    lost_out = sum(a.output_tokens for a in redone)
    kept_in = sum(a.input_tokens for a in answered if not a.redone)
    kept_out = sum(a.output_tokens for a in answered if not a.redone)
    count = len(requests) - (model.calls + 1)
    if count != len(redone):
        notes.append(f"{len(redone)} requests asked again for a call, {count} beyond N + 1")
    return Sample(
        kind=kind,
        way=way,
        resume_by=resume_by,
        calls=model.calls,
        crash_at=model.crash_at,
        requests=len(requests),
        redone=count,
        back_seconds=round(after[0].received_at - killed_at, 4),
        caught_up_seconds=round(again[0].received_at - killed_at, 4) if again else float("nan"),
        lost_input_tokens=lost_in,
        lost_output_tokens=lost_out,
        lost_usd=round(cost(kind, lost_in, lost_out), 6),
        clean_usd=round(cost(kind, kept_in, kept_out), 6),
        sessions=len(fake.session_ids()),
        finished=finished,
        notes=notes,
    )


def _drain(running: Running) -> None:
    """Read a process's output as it comes, so a full pipe never stalls it (its output is
    never looked at: only the last process's is)."""
    threading.Thread(target=running.process.communicate, daemon=True).start()


def new_sandbox(root: Path, cli: AgentCli, folder: Path) -> Sandbox:
    return Sandbox.make(root, cli, folder, bubblewrap_works())


def measure_naive(kind: str, folder: Path, root: Path, calls: int, crash_at: int) -> Sample:
    """The baseline: the CLI run from scratch again when it dies (`claude -p TASK`)."""
    sandbox = new_sandbox(root, agent_cli(kind), folder)
    marker = f"{sandbox.work_inside}/.crashed"
    model = TaskModel(calls, crash_at, marker)
    started: list[Running] = []
    try:
        with FakeModelApi(model) as fake:
            driver = KIND_FACTS[kind].driver(sandbox, fake)
            first = driver.start(driver.first(TASK))
            started.append(first)
            _drain(first)
            _wait_for_call_running(fake, model, driver, first.tree, 0)
            cli = first.cli_pid()
            (sandbox.work / ".crashed").touch()
            killed_at = time.monotonic()
            os.kill(cli, signal.SIGKILL)
            first.process.wait(timeout=30)
            again = driver.start(driver.first(TASK))  # the naive loop: from scratch
            started.append(again)
            done = again.wait(timeout=300)
            finished = done.returncode == 0
            notes = [] if finished else [done.describe()[-300:]]
            return _summarize(kind, "naive", "", model, fake, killed_at, finished, notes)
    finally:
        for running in started:
            running.clean_up()


def measure_overnight(
    kind: str, folder: Path, root: Path, calls: int, crash_at: int, resume_by: ResumeBy
) -> Sample:
    """overnight's way: the same session resumed, by the adapter (or as the adapter does)."""
    if resume_by == "cli":
        return _resume_by_cli(kind, folder, root, calls, crash_at)
    from tests.agent_clis.adapter import Adapter, Workspace, environment

    store = root / "store"
    store.mkdir(parents=True)
    ws = Workspace(new_sandbox(root / "sandbox", agent_cli(kind), folder), store).make()
    marker = f"{ws.sandbox.work_inside}/.crashed"
    model = TaskModel(calls, crash_at, marker)
    adapter: Adapter | None = None
    try:
        with FakeModelApi(model) as fake:
            ws.write_config(fake, prompt=TASK)
            adapter = Adapter.start(ws, environment(fake, kind, ws))
            driver = KIND_FACTS[kind].driver(ws.sandbox, fake)
            _wait_for_call_running(fake, model, driver, adapter.tree, 0)
            cli = adapter.cli_pid()
            (ws.work / ".crashed").touch()
            killed_at, killed_at_epoch = time.monotonic(), time.time()
            os.kill(cli, signal.SIGKILL)
            code, out, err = adapter.wait(timeout=300)
            notes = [] if code == 0 else [f"adapter exit {code}: {(out + err)[-300:]}"]
            steps = ws.checkpoint().get("step")
            if code == 0 and steps != calls:
                notes.append(f"its checkpoint says step {steps}, not {calls}")
            sample = _summarize(
                kind, "overnight", "adapter", model, fake, killed_at, code == 0, notes
            )
            sample.stages = _stages(ws.log(), killed_at_epoch)
            return sample
    finally:
        if adapter is not None:
            adapter.clean_up()


def _stages(log: list[dict[str, Any]], killed_at: float) -> dict[str, float]:
    """When the adapter handled the kill, from its log (epoch seconds, after `killed_at`)."""
    stages: dict[str, float] = {}
    for line in log:
        event, at = line.get("event"), float(line.get("at", 0))
        if event in ("cli_ended", "cli_started") and at >= killed_at and event not in stages:
            stages[str(event)] = round(at - killed_at, 4)
    return stages


def _resume_by_cli(kind: str, folder: Path, root: Path, calls: int, crash_at: int) -> Sample:
    """The same session resumed by the bench itself, as the adapter does: the killed CLI's
    leftovers ended, then `--resume ID -p continue` (`codex exec resume ID continue`)."""
    sandbox = new_sandbox(root, agent_cli(kind), folder)
    marker = f"{sandbox.work_inside}/.crashed"
    model = TaskModel(calls, crash_at, marker)
    started: list[Running] = []
    try:
        with FakeModelApi(model) as fake:
            driver = KIND_FACTS[kind].driver(sandbox, fake)
            first = driver.start(driver.first(TASK))
            started.append(first)
            _drain(first)
            _wait_for_call_running(fake, model, driver, first.tree, 0)
            cli = first.cli_pid()
            (sandbox.work / ".crashed").touch()
            killed_at = time.monotonic()
            os.kill(cli, signal.SIGKILL)
            first.process.wait(timeout=30)
            first.clean_up()  # what it left running (its tool's shell)
            session_id = fake.requests()[0].session_id
            again = driver.start(driver.resume(session_id, "continue"))
            started.append(again)
            done = again.wait(timeout=300)
            finished = done.returncode == 0
            notes = [] if finished else [done.describe()[-300:]]
            return _summarize(kind, "overnight", "cli", model, fake, killed_at, finished, notes)
    finally:
        for running in started:
            running.clean_up()
