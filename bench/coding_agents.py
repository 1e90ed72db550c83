"""What a crash of a real coding-agent CLI costs: `python -m bench.coding_agents`.

A task of `calls` tool calls (10) run by the real pinned CLI (Claude Code; Codex too with
`--kind codex`) in bubblewrap against the fake model API (`fakes.model_api`), as
tests/agent_clis runs them. In each sample the CLI is SIGKILLed during tool call k, once its
session file records the call (Claude Code writes its session a little after a tool starts:
killed before that, the resumed session has lost the call), at several k. Then, in the same run:

- **overnight's way**: the run's agent is overnight's adapter
  (overnight/agent_kit/coding_agent.py), which sees its CLI die, ends what it left running and
  resumes the same session (`--resume ID`, `codex exec resume ID`); with `--resume-by cli` the
  bench resumes the session itself the way the adapter does, for a tree without the adapter;
- **the baseline**: a naive loop that runs `claude -p TASK` (`codex exec TASK`) again from
  scratch when it dies, in the same workspace.

The model is the fake, answering as a function of the conversation (`TaskModel`): the next
call is the first of 1..N whose result the conversation does not hold, then the final text. So
a run started from scratch is asked for every call again, and a resumed session for the call
the kill interrupted (its result says it was interrupted: a real model asks for it again),
then the rest. Each call appends to `steps.txt` and prints `step i ok`; call k first sleeps
until the bench has killed its CLI.

Rows (group `codingagents`), per CLI, median and max over the crashes:
- model turns redone per crash: requests beyond the N + 1 of a clean run (target <= 1);
- crash to the CLI working again: the SIGKILL to the next CLI's first model request
  (target <= 2 s); and, for context, to the request that asks for call k again (where it was);
- spend lost per crash: the redone requests' tokens at the CLI's list price. The fake reports
  each request's input tokens as its body's size / 4 (the rule of thumb for English and
  JSON), uncached, so the figure is what the redone turns would cost without prompt caching.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from activities.coding_agent_setup import DEFAULT_PRICES
from bench.report import RESULTS_DIR, Row, machine, render_text, save_results
from fakes.model_api import FakeModelApi, RecordedRequest, Script, Shell, text, tools
from fakes.model_api.script import Choice
from fakes.model_api.turns import Answer
from overnight.agent_kinds import AgentCli, agent_cli
from overnight.worker.agent_clis import InstallError, check, install
from tests.agent_clis.clis import DRIVERS, Driver, Running, executable_name
from tests.agent_clis.sandbox import Sandbox, bubblewrap_works

GROUP = "codingagents"
KINDS = ("claude-code", "codex")
CALLS = 10
CRASH_AT = (2, 4, 6, 8, 10)
REDONE_AT_MOST = 1
BACK_AT_MOST = 2.0  # seconds, locally
TASK = "Run the ten steps of the task, one shell command each, in order."
# Where the pinned CLIs are installed when --agents-home is not given (scripts/test's folder).
AGENTS_HOME_ENV = "OVERNIGHT_TEST_AGENTS_HOME"
# USD per million tokens, list prices: Claude Code's default model family (Sonnet), and
# Codex's (the worker's own default table, activities/coding_agent_setup.py).
LIST_PRICES: dict[str, tuple[str, float, float]] = {
    "claude-code": ("Claude Sonnet", 3.0, 15.0),
    "codex": (
        "gpt-5-codex",
        DEFAULT_PRICES["gpt-5-codex"]["input_per_mtok"],
        DEFAULT_PRICES["gpt-5-codex"]["output_per_mtok"],
    ),
}
ResumeBy = Literal["adapter", "cli"]
Way = Literal["overnight", "naive"]


# --- the model ---


@dataclass(frozen=True)
class Answered:
    """One request the model answered: with call `call` (0: the final text)."""

    number: int
    call: int
    redone: bool  # this call (or the final text) was asked for before in this sample
    input_tokens: int
    output_tokens: int


def command(call: int, crash_at: int, marker: str) -> str:
    """Call `call`'s shell command: a line in steps.txt, then `step N ok` (printed, so the
    result holds it but the command does not). Call `crash_at` sleeps until `marker` exists
    (the bench makes it before the kill): its CLI dies during it, its redo goes on."""
    wait = f" && {{ [ -e {marker} ] || exec sleep 60; }}" if call == crash_at else ""
    return f"echo {call} >> steps.txt{wait} && printf 'step %s ok\\n' {call}"


class TaskModel(Script):
    """The fake model of the task: a function of the conversation (see the module)."""

    def __init__(self, calls: int, crash_at: int, marker: str) -> None:
        super().__init__([])
        self.calls = calls
        self.crash_at = crash_at
        self.marker = marker
        self.answered: list[Answered] = []
        self._asked: set[int] = set()
        self._model_lock = threading.Lock()

    def choose(self, request: RecordedRequest) -> Choice:
        outputs = [result.output for result in request.tool_results()]
        done = {i for i in range(1, self.calls + 1) if any(f"step {i} ok" in o for o in outputs)}
        call = next((i for i in range(1, self.calls + 1) if i not in done), 0)
        tokens_in = max(1, len(json.dumps(request.body)) // 4)
        turn: Answer
        if call:
            shell = command(call, self.crash_at, self.marker)
            tokens_out = 20 + len(shell) // 4
            turn = tools(
                Shell(shell),
                label=f"call {call}",
                input_tokens=tokens_in,
                output_tokens=tokens_out,
            )
        else:
            tokens_out = 20
            turn = text(
                f"All {self.calls} steps done.",
                label="final",
                input_tokens=tokens_in,
                output_tokens=tokens_out,
            )
        with self._model_lock:
            redone = call in self._asked
            self._asked.add(call)
            self.answered.append(Answered(request.number, call, redone, tokens_in, tokens_out))
        return Choice(call - 1 if call else self.calls, turn)

    def answer_of(self, number: int) -> Answered | None:
        with self._model_lock:
            return next((a for a in self.answered if a.number == number), None)


# --- one sample ---


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


def _cost(kind: str, tokens_in: int, tokens_out: int) -> float:
    _, per_in, per_out = LIST_PRICES[kind]
    return (tokens_in * per_in + tokens_out * per_out) / 1e6


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
    (see the module); its call id. `before`: the requests of earlier processes."""

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
        lost_usd=round(_cost(kind, lost_in, lost_out), 6),
        clean_usd=round(_cost(kind, kept_in, kept_out), 6),
        sessions=len(fake.session_ids()),
        finished=finished,
        notes=notes,
    )


def _drain(running: Running) -> None:
    """Read a process's output as it comes, so a full pipe never stalls it (its output is
    never looked at: only the last process's is)."""
    threading.Thread(target=running.process.communicate, daemon=True).start()


def _sandbox(root: Path, cli: AgentCli, folder: Path) -> Sandbox:
    return Sandbox.make(root, cli, folder, bubblewrap_works())


def measure_naive(kind: str, folder: Path, root: Path, calls: int, crash_at: int) -> Sample:
    """The baseline: the CLI run from scratch again when it dies (`claude -p TASK`)."""
    sandbox = _sandbox(root, agent_cli(kind), folder)
    marker = f"{sandbox.work_inside}/.crashed"
    model = TaskModel(calls, crash_at, marker)
    started: list[Running] = []
    try:
        with FakeModelApi(model) as fake:
            driver = DRIVERS[kind](sandbox, fake)
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
    ws = Workspace(_sandbox(root / "sandbox", agent_cli(kind), folder), store).make()
    marker = f"{ws.sandbox.work_inside}/.crashed"
    model = TaskModel(calls, crash_at, marker)
    adapter: Adapter | None = None
    try:
        with FakeModelApi(model) as fake:
            ws.write_config(fake, prompt=TASK)
            adapter = Adapter.start(ws, environment(fake, kind, ws))
            driver = DRIVERS[kind](ws.sandbox, fake)
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
    sandbox = _sandbox(root, agent_cli(kind), folder)
    marker = f"{sandbox.work_inside}/.crashed"
    model = TaskModel(calls, crash_at, marker)
    started: list[Running] = []
    try:
        with FakeModelApi(model) as fake:
            driver = DRIVERS[kind](sandbox, fake)
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


# --- the whole run ---


def installed_folder(kind: str, home: Path) -> Path:
    """The pinned CLI's install under `home` (installed now from the npm registry when it is
    not there)."""
    cli = agent_cli(kind)
    ready = check(cli, home, verify=False)
    if ready.ready:
        return install(cli, home).folder  # there already: only looked at
    try:
        return install(cli, home).folder
    except InstallError as error:
        raise BenchError(f"{cli.npm_spec} is not installed under {home}: {error}") from None


def _warm(kind: str, folder: Path, root: Path) -> None:
    """The CLI's binary read once (`--version` in a sandbox), so the first sample does not
    pay for the page cache alone."""
    sandbox = _sandbox(root, agent_cli(kind), folder)
    argv, env = sandbox.command([sandbox.executable_inside, "--version"], {})
    subprocess.run(argv, env=env, cwd=sandbox.work, capture_output=True, timeout=120)


def adapter_available() -> bool:
    try:
        import tests.agent_clis.adapter  # noqa: F401
    except ImportError:
        return False
    kit = Path(__file__).resolve().parent.parent / "overnight" / "agent_kit" / "coding_agent.py"
    return kit.is_file()


def measure(
    kinds: Sequence[str],
    home: Path,
    calls: int = CALLS,
    crash_at: Sequence[int] = CRASH_AT,
    resume_by: ResumeBy = "adapter",
    out: Any = print,
) -> list[Sample]:
    """Every sample: per kind and crash point, overnight's way then the naive loop."""
    if any(not 1 <= k <= calls for k in crash_at):
        raise ValueError(f"crash points are calls 1..{calls}")
    samples: list[Sample] = []
    base = Path(tempfile.mkdtemp(prefix="overnight-bench-agents-"))
    try:
        for kind in kinds:
            folder = installed_folder(kind, home)
            _warm(kind, folder, base / f"{kind}-warm")
            for index, k in enumerate(crash_at):
                ways: tuple[Way, Way] = ("overnight", "naive")
                for way in ways if index % 2 == 0 else ways[::-1]:  # neither always first
                    root = base / f"{kind}-{k}-{way}"
                    if way == "overnight":
                        sample = measure_overnight(kind, folder, root, calls, k, resume_by)
                    else:
                        sample = measure_naive(kind, folder, root, calls, k)
                    out(json.dumps(asdict(sample)))
                    samples.append(sample)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return samples


def _median(values: list[float]) -> float:
    return round(statistics.median(values), 4)


def _stat(samples: Sequence[Sample], name: str, stat: str) -> float:
    values = [float(getattr(sample, name)) for sample in samples]
    return _median(values) if stat == "median" else round(max(values), 4)


def result_rows(samples: Sequence[Sample]) -> list[Row]:
    rows: list[Row] = []
    for kind in dict.fromkeys(s.kind for s in samples):
        ours = [s for s in samples if s.kind == kind and s.way == "overnight"]
        naive = [s for s in samples if s.kind == kind and s.way == "naive"]
        if ours and naive:
            rows += _kind_rows(kind, ours, naive)
    for row in rows:
        row.group = GROUP
    return rows


def _kind_rows(kind: str, ours: list[Sample], naive: list[Sample]) -> list[Row]:
    calls = ours[0].calls
    crashes = ", ".join(str(s.crash_at) for s in ours)
    how = {
        "adapter": "overnight's adapter (overnight/agent_kit/coding_agent.py) resumed the same "
        "session",
        "cli": "the bench resumed the same session with the CLI's own resume, as the adapter "
        "does (the adapter was not used)",
    }[ours[0].resume_by]
    naive_how = "`claude -p TASK`" if kind == "claude-code" else "`codex exec TASK`"
    said = (
        f"{len(ours)} crashes (SIGKILL during tool call k = {crashes} of {calls}, once the "
        f"session file records it); {how}; baseline: {naive_how} run again from scratch. The "
        "fake model asks for each call whose result the conversation lacks: the resumed "
        "session's first request carries call k's interrupted result, so call k is asked for "
        "again (1 turn); the baseline's fresh session, calls 1..k"
    )
    unfinished = [f"{s.way} k={s.crash_at}" for s in ours + naive if not s.finished]
    if unfinished:
        said += f"; NOT finished: {', '.join(unfinished)}"
    back = (
        "SIGKILL of the CLI to the first model request of the next CLI (overnight: the resumed "
        "session's; baseline: the fresh run's)"
    )
    stages = [s.stages for s in ours if "cli_ended" in s.stages and "cli_started" in s.stages]
    if stages:
        ended = _median([st["cli_ended"] for st in stages])
        begun = _median([st["cli_started"] for st in stages])
        back += (
            f"; medians: the adapter done with the dead CLI {ended:.2f} s after the kill "
            f"(leftovers ended, session stored, checkpoint saved), resume begun {begun:.2f} s, "
            "the rest is the CLI's own start"
        )
    name, per_in, per_out = LIST_PRICES[kind]
    clean = _median([s.clean_usd for s in ours])
    spent = (
        f"the redone requests' tokens at {name}'s list price (${per_in:g} in, ${per_out:g} out "
        f"per M tokens), input tokens = request bytes / 4, no prompt caching; a clean run of "
        f"{calls} calls costs about ${clean:.3f}"
    )
    rows = []
    for stat in ("median", "max"):
        rows.append(
            Row(
                f"{kind}: model turns redone per crash, {stat}",
                "turns",
                _stat(naive, "redone", stat),
                _stat(ours, "redone", stat),
                target=f"<= {REDONE_AT_MOST}",
                at_most=REDONE_AT_MOST,
                note=said,
            )
        )
    for stat in ("median", "max"):
        rows.append(
            Row(
                f"{kind}: crash -> the CLI's next model request, {stat}",
                "s",
                _stat(naive, "back_seconds", stat),
                _stat(ours, "back_seconds", stat),
                target=f"<= {BACK_AT_MOST:g} s",
                at_most=BACK_AT_MOST,
                note=back,
            )
        )
    rows.append(
        Row(
            f"{kind}: crash -> asking again for the killed call, median",
            "s",
            _stat(naive, "caught_up_seconds", "median"),
            _stat(ours, "caught_up_seconds", "median"),
            note="SIGKILL to the model request answered with call k again, where the CLI was "
            "(the baseline redoes calls 1..k-1 first); the fake answers at once, so each "
            "redone turn here costs a real model's latency more",
        )
    )
    for stat in ("median", "max"):
        rows.append(
            Row(
                f"{kind}: spend lost per crash, {stat}",
                "USD",
                _stat(naive, "lost_usd", stat),
                _stat(ours, "lost_usd", stat),
                note=spent,
            )
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.coding_agents")
    parser.add_argument("--kind", action="append", choices=KINDS, help="default: both")
    parser.add_argument("--calls", type=int, default=CALLS, help="tool calls of the task")
    parser.add_argument(
        "--crash-at",
        type=int,
        action="append",
        help=f"kill during this tool call (repeatable; default {', '.join(map(str, CRASH_AT))})",
    )
    parser.add_argument(
        "--resume-by",
        choices=("adapter", "cli"),
        help="overnight's way: the adapter (default, when the tree has it) or the CLI's resume",
    )
    parser.add_argument(
        "--agents-home",
        type=Path,
        help=f"where the pinned CLIs are installed (default ${AGENTS_HOME_ENV} or "
        "~/.cache/overnight-test-agents; installed there when missing)",
    )
    parser.add_argument("--results", type=Path, default=RESULTS_DIR, help="folder for latest.json")
    args = parser.parse_args(argv)
    began, started_at = time.monotonic(), datetime.now(UTC)
    home = args.agents_home or Path(
        os.environ.get(AGENTS_HOME_ENV) or Path.home() / ".cache" / "overnight-test-agents"
    )
    resume_by: ResumeBy = args.resume_by or ("adapter" if adapter_available() else "cli")
    kinds = args.kind or list(KINDS)
    crash_at = args.crash_at or [k for k in CRASH_AT if k <= args.calls]
    samples = measure(kinds, home, args.calls, crash_at, resume_by)
    rows = result_rows(samples)
    details: dict[str, Any] = {"coding_agents": [asdict(s) for s in samples]}
    given = sys.argv[1:] if argv is None else argv
    meta = {
        "command": " ".join(["python -m bench.coding_agents", *given]),
        "machine": machine(),
        "started_at": started_at.isoformat(timespec="seconds"),
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "wall_seconds": round(time.monotonic() - began),
        "metrics": [GROUP],
    }
    _, json_path, _ = save_results(args.results, rows, details, meta)
    print(render_text(rows))
    print(f"wrote {json_path}")
    return 0 if all(row.passed is not False for row in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
