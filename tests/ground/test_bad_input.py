"""Hostile input is refused or survived: specs, CLI arguments, checkpoints, signals, updates.

- Generated RunSpecs that are wrong are refused with one line before any connection: by the
  client API (`parse_spec`, `load_spec`) and by `overnight start` (exit 2).
- CLI garbage exits 2 with a one-line reason.
- Checkpoints that are binary, cut-off JSON, 10 MB or a symlink out of the sandbox never
  replace the last good one and never crash the workflow (real runs, local provider).
- Bad `extend_budget` / `cancel` payloads are rejected or ignored and the run carries on.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import posixpath
import re
import string
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.service import RPCError, RPCStatusCode

from overnight.cli import client as api
from overnight.cli.main import main as cli_main
from overnight.core.models import MAX_HOURS, MAX_SECONDS, Budget, BudgetExtension, RunSpec
from overnight.worker.devserver import DevServer
from tests.e2e.helpers import agent_spec, wait_for_status, wait_no_agent_processes
from tests.live import (
    in_process_worker,
    new_run_id,
    nothing_left_running,
    running_sandboxes,
    scripted_spec,
    task_failures,
)
from tests.waits import CAP

# Nothing listens here: a command that wrongly connects fails with 1, not 2.
NOWHERE = ["--address", "127.0.0.1:9"]
BASE: dict[str, Any] = {
    "run_id": "bad-input",
    "repo": "/tmp/nowhere.git",
    "agent_dir": "/tmp/agent",
    "command": "python3 /workspace/agent/main.py",
}
RUN_ID = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")
SPEC_SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)

# --- generated bad specs -----------------------------------------------------------------------

STR_FIELDS = ["run_id", "repo", "branch", "agent_dir", "command", "cwd", "checkpoint_path"]
INT_FIELDS = ["max_checkpoint_bytes", "vcpu", "memory_mib", "fresh_context_exit_code"]
SECONDS_FIELDS = ["sandbox_timeout_seconds", "poll_seconds", "stall_seconds"]
HOURS_FIELDS = ["attention_hours"]

scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=8))
containers = st.one_of(
    st.lists(scalars, max_size=3), st.dictionaries(st.text(max_size=5), scalars, max_size=3)
)
not_a_string = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), containers
)
not_a_number = st.one_of(st.none(), st.booleans(), st.text(max_size=8), containers)
not_an_int = st.one_of(not_a_number, st.floats())  # strict: not even 2.0
not_a_bool = st.one_of(st.none(), st.integers(), st.floats(), st.text(max_size=8), containers)


@st.composite
def wrong_types(draw: st.DrawFn) -> tuple[dict[str, Any], str]:
    """A spec with one field of a type it must not coerce (`true` is no number, `"5"` neither)."""
    table: list[tuple[str, st.SearchStrategy[Any]]] = [
        *((name, not_a_string) for name in STR_FIELDS),
        ("provider", not_a_string),
        *((name, not_an_int) for name in INT_FIELDS),
        *((name, not_a_number) for name in SECONDS_FIELDS + HOURS_FIELDS),
        ("keep_sandboxes", not_a_bool),
        (
            "env",
            st.one_of(
                st.text(max_size=5),
                st.lists(st.text(max_size=3), min_size=1),
                st.dictionaries(st.just("A"), not_a_string, min_size=1),
            ),
        ),
        (
            "secret_env",
            st.one_of(
                st.text(min_size=1, max_size=5),
                st.integers(),
                st.lists(not_a_string, min_size=1, max_size=2),
            ),
        ),
        (
            "budget",
            st.one_of(
                st.text(max_size=5),
                st.integers(),
                st.lists(scalars, max_size=2),
                st.fixed_dictionaries({"max_restarts": not_an_int}),
                st.fixed_dictionaries({"max_hours": not_a_number}),
            ),
        ),
        (
            "rates",
            st.one_of(
                st.text(max_size=5),
                st.integers(),
                st.fixed_dictionaries({"vcpu_hour_usd": not_a_number}),
            ),
        ),
    ]
    name, values = draw(st.sampled_from(table))
    return {**BASE, name: draw(values)}, name


@st.composite
def unknown_fields(draw: st.DrawFn) -> tuple[dict[str, Any], str]:
    key = draw(st.text(min_size=1, max_size=12).filter(lambda k: k not in RunSpec.model_fields))
    if draw(st.booleans()):
        return {**BASE, key: draw(scalars)}, key
    nested = draw(st.text(min_size=1, max_size=12).filter(lambda k: k not in Budget.model_fields))
    return {**BASE, "budget": {nested: 1}}, "budget"


# An empty run id is not bad: it means "take it from the workflow id".
bad_run_ids = st.one_of(
    st.text(min_size=1, max_size=70).filter(lambda s: RUN_ID.fullmatch(s) is None),
    st.from_regex(r"[a-z0-9][a-z0-9-]{63,70}", fullmatch=True),  # too long
    st.sampled_from(["-lead", "UPPER", "a_b", "a b", "a.b", "abc\n", "é", "a/b"]),
)

not_positive = st.one_of(
    st.floats(max_value=0.0),
    st.integers(max_value=0),
    st.sampled_from([float("nan"), float("inf"), -float("inf")]),
)


@st.composite
def bad_durations(draw: st.DrawFn) -> tuple[dict[str, Any], str]:
    name = draw(st.sampled_from(SECONDS_FIELDS + HOURS_FIELDS + ["budget"]))
    limit = MAX_HOURS if name in HOURS_FIELDS + ["budget"] else MAX_SECONDS
    value = draw(st.one_of(not_positive, st.floats(min_value=limit, exclude_min=True)))
    if name == "budget":
        return {**BASE, "budget": {"max_hours": value}}, "budget"
    return {**BASE, name: value}, name


SEGMENTS = ["..", ".", "", "workspace", "agent", "etc", "x.json", "app", "workspacex"]


def _refused_path(path: str, *, checkpoint: bool) -> bool:
    """Whether RunSpec must refuse `path`: relative, outside /workspace, or (for the
    checkpoint) /workspace itself or inside agent/."""
    normal = posixpath.normpath(path)
    if not path.startswith("/"):
        return True
    if normal == "/workspace":
        return checkpoint
    if not normal.startswith("/workspace/"):
        return True
    return checkpoint and normal.startswith("/workspace/agent/")


@st.composite
def escaping_paths(draw: st.DrawFn) -> tuple[dict[str, Any], str]:
    """checkpoint_path or cwd leaving /workspace (or the checkpoint in agent/), or an
    absolute agent_dir or repo with `..` in it (a spec file's relative ones are taken from its
    folder, so only an absolute one is wrong in a file too)."""
    field = draw(st.sampled_from(["checkpoint_path", "cwd", "agent_dir", "repo"]))
    parts = draw(st.lists(st.sampled_from(SEGMENTS), min_size=1, max_size=5))
    if field in ("agent_dir", "repo"):
        parts.insert(draw(st.integers(0, len(parts))), "..")
        return {**BASE, field: "/" + "/".join(parts)}, field
    path = ("/" if draw(st.booleans()) else "") + "/".join(parts)
    assume(_refused_path(path, checkpoint=field == "checkpoint_path"))
    return {**BASE, field: path}, field


bad_specs = st.one_of(
    wrong_types(),
    unknown_fields(),
    bad_run_ids.map(lambda rid: ({**BASE, "run_id": rid}, "run_id")),
    bad_durations(),
    escaping_paths(),
)


def _assert_one_clear_line(message: str, field: str) -> None:
    assert len(message.splitlines()) == 1, message
    assert "field " in message, message
    printable = "".join(
        c if c.isprintable() else c.encode("unicode_escape").decode() for c in field
    )
    assert printable.split(".")[0] in message, message


@SPEC_SETTINGS
@given(bad_specs)
def test_generated_bad_specs_are_refused_by_the_client_api_with_one_line(
    case: tuple[dict[str, Any], str],
) -> None:
    raw, field = case
    with pytest.raises(api.SpecError) as refused:
        api.parse_spec(raw)
    assert refused.value.bad_input
    _assert_one_clear_line(str(refused.value), field)


def _run_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli_main(list(argv))
        except SystemExit as exit_:  # argparse exits on its own
            code = exit_.code if isinstance(exit_.code, int) else 1
    return code, out.getvalue(), err.getvalue()


@SPEC_SETTINGS
@given(bad_specs)
def test_generated_bad_specs_make_overnight_start_exit_2_before_connecting(
    case: tuple[dict[str, Any], str],
) -> None:
    raw, field = case
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "spec.json"
        path.write_text(json.dumps(raw))  # NaN and Infinity too, as Python's json writes them
        with pytest.raises(api.SpecError):
            api.load_spec(path)
        code, out, err = _run_cli(*NOWHERE, "start", str(path))
    assert (code, out) == (2, ""), err
    assert err.startswith("overnight: ") and err.endswith("\n")
    _assert_one_clear_line(err.rstrip("\n"), field)


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"\xff\xfe binary \x00", "not valid JSON"),
        (b"[" * 100_000, "not valid JSON"),
        (b"", "not valid JSON"),
        (b'{"run_id": "a", ', "not valid JSON"),
        (b"[1, 2]", "a spec is a JSON object"),
        (b'"just a string"', "a spec is a JSON object"),
    ],
)
def test_spec_files_that_are_not_a_json_object_exit_2_with_one_line(
    tmp_path: Path, content: bytes, reason: str
) -> None:
    path = tmp_path / "spec.json"
    path.write_bytes(content)
    code, out, err = _run_cli(*NOWHERE, "start", str(path))
    assert (code, out) == (2, "")
    assert len(err.splitlines()) == 1 and reason in err, err


def test_a_folder_given_as_spec_exits_2(tmp_path: Path) -> None:
    code, _, err = _run_cli(*NOWHERE, "start", str(tmp_path))
    assert code == 2 and len(err.splitlines()) == 1, err


async def test_a_refused_spec_never_starts_a_workflow(
    dev_server: DevServer, dev_client: Client, tmp_path: Path
) -> None:
    run_id = new_run_id("refused")
    path = tmp_path / "spec.json"
    path.write_text(json.dumps({**BASE, "run_id": run_id, "poll_seconds": -1}))
    code, _, err = await asyncio.to_thread(
        _run_cli, "--address", dev_server.address, "start", str(path)
    )
    assert code == 2, err
    with pytest.raises(RPCError) as missing:
        await dev_client.get_workflow_handle(run_id).describe()
    assert missing.value.status == RPCStatusCode.NOT_FOUND


# --- CLI garbage -------------------------------------------------------------------------------


def _command_names() -> set[str]:
    """Every subcommand the CLI has (a generated word that names one is not garbage)."""
    from overnight.cli.main import build_parser

    parser = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return set(subparsers.choices)


COMMANDS = _command_names()


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["frobnicate"],
        ["--no-such-flag"],
        ["start"],
        ["start", "a.json", "b.json"],
        ["start", "a.json", "--wait=yes"],
        ["status"],
        ["status", "a", "--json", "extra"],
        ["cancel"],
        ["cancel", "a", "--reason"],
        ["extend", "a", "--restarts", "many"],
        ["extend", "a", "--hours", "NaNa"],
        ["extend", "a", "--restarts", "-1"],
        ["extend", "a", "--hours", "-0.5"],
        ["extend", "a", "--spend", "-3"],
        ["extend", "a", "--hours", "inf"],
        ["extend", "a", "--hours", "nan"],
        ["extend", "a"],
        ["list", "--open=1"],
        ["reap", "--paused", "now"],
        ["demo", "--keep-server", "x"],
        ["--address"],
    ],
)
def test_cli_garbage_exits_2_with_a_one_line_reason(argv: list[str]) -> None:
    code, out, err = _run_cli(*NOWHERE, *argv)
    assert code == 2, (code, err)
    assert out == ""
    assert len(err.strip().splitlines()) == 1, err


garbage_words = st.text(
    alphabet=st.characters(exclude_categories=["Cs"]), min_size=1, max_size=12
).filter(lambda w: w not in COMMANDS and not w.startswith("-"))


@settings(max_examples=80, deadline=None)
@given(st.lists(garbage_words, min_size=1, max_size=4))
def test_generated_cli_garbage_exits_2_with_one_line(argv: list[str]) -> None:
    code, out, err = _run_cli(*NOWHERE, *argv)
    assert code == 2, (code, err)
    assert out == ""
    assert len(err.splitlines()) == 1, err


@settings(max_examples=40, deadline=None)
@given(
    st.sampled_from(["--restarts", "--hours", "--spend"]),
    st.text(alphabet=string.printable, min_size=1, max_size=8),
)
def test_generated_bad_extension_values_exit_2(flag: str, value: str) -> None:
    try:
        number = float(value)
    except ValueError:
        number = None
    good = (
        number is not None
        and number == number
        and abs(number) != float("inf")
        and number >= 0
        and (flag != "--restarts" or value.strip().lstrip("+").isdigit())
    )
    if good:
        return  # a usable value: it would connect, which this test is not about
    code, out, err = _run_cli(*NOWHERE, "extend", "some-run", f"{flag}={value}")
    assert code == 2, (code, err)
    assert out == "" and len(err.splitlines()) == 1, err


# --- checkpoints that must never replace the good one -----------------------------------------

GOOD_CHECKPOINT = json.dumps(
    {"step": 1, "done": ["good step"], "next": "the bad write", "notes": ["good checkpoint"]}
)


@pytest.mark.parametrize(
    ("mode", "why"),
    [
        ("bad-binary", "could not be read"),
        ("bad-truncated", "stopped parsing as JSON"),
        ("bad-huge", "over the 262144 cap"),
        ("bad-symlink", "outside the sandbox"),
        ("bad-fifo", "could not be read: it is a FIFO"),
        ("bad-folder", "could not be read: it is a folder"),
        ("bad-deep", "could not be read: it nests deeper than 64 levels"),
    ],
)
async def test_a_bad_checkpoint_never_replaces_the_last_good_one(
    dev_client: Client, tmp_path: Path, mode: str, why: str
) -> None:
    run_id = new_run_id(mode)
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps({"step": 99, "next": "stolen from outside the sandbox"}))
    spec = scripted_spec(
        run_id, tmp_path, mode, env={"AGENT_OUTSIDE_FILE": str(outside), "AGENT_HOLD": "3"}
    )
    async with nothing_left_running(dev_client) as runs, in_process_worker(dev_client) as queue:
        runs.append(run_id)
        await api.start_run(dev_client, spec, task_queue=queue)
        refused = await wait_for_status(
            dev_client, run_id, lambda s: s.checkpoint_rejected is not None, timeout=CAP
        )
        result = await asyncio.wait_for(api.wait_result(dev_client, run_id), timeout=CAP)

    assert why in (refused.checkpoint_rejected or ""), refused.checkpoint_rejected
    assert refused.checkpoint_summary is not None
    assert refused.checkpoint_summary.next == "the bad write"
    assert result.outcome == "finished"
    assert result.checkpoint == GOOD_CHECKPOINT
    assert result.restarts == 0
    assert await task_failures(dev_client, run_id) == []
    assert running_sandboxes(run_id) == []


# --- bad signal and update payloads ----------------------------------------------------------

BAD_EXTENSIONS: list[Any] = [
    {"restarts": -1},
    {"hours": -2.5},
    {"spend_usd": -1},
    {"restarts": "lots"},
    {"restarts": True},
    {"hours": "1"},
    {"hours": 1e300},
    {"restarts": 1, "surprise": 1},
    ["restarts", 1],
    "one more please",
    42,
    None,
]


async def test_bad_signal_and_update_payloads_are_refused_and_the_run_carries_on(
    dev_client: Client, tmp_path: Path
) -> None:
    run_id = new_run_id("badmsg")
    spec, _ = agent_spec(run_id, tmp_path, agent_env={"AGENT_STEP_DELAY": "30"})
    async with nothing_left_running(dev_client) as runs, in_process_worker(dev_client) as queue:
        runs.append(run_id)
        await api.start_run(dev_client, spec, task_queue=queue)
        handle = dev_client.get_workflow_handle(run_id)
        await wait_for_status(dev_client, run_id, lambda s: s.state == "running")

        for payload in BAD_EXTENSIONS:
            await handle.signal("extend_budget", payload)
        await handle.signal("extend_budget")
        await handle.signal("extend_budget", args=[{"restarts": 1}, {"restarts": 1}])
        await handle.signal("no_such_signal", {"restarts": 1})
        for payload in [*BAD_EXTENSIONS, {}, {"restarts": 0}]:
            with pytest.raises(WorkflowUpdateFailedError):
                await handle.execute_update("extend_budget", payload, result_type=Budget)
        with pytest.raises(WorkflowUpdateFailedError):
            await handle.execute_update(
                "extend_budget", args=[{"restarts": 1}, {"restarts": 1}], result_type=Budget
            )

        still = await wait_for_status(dev_client, run_id, lambda s: s.state == "running")
        assert still.budget == spec.budget, "a bad extension changed the budget"
        # A good extension still works, both ways, and the run is still steerable.
        grown = await api.extend_budget_and_wait(dev_client, run_id, BudgetExtension(restarts=2))
        assert grown.max_restarts == spec.budget.max_restarts + 2
        await api.extend_budget(dev_client, run_id, BudgetExtension(hours=1))
        await wait_for_status(
            dev_client, run_id, lambda s: s.budget.max_hours == spec.budget.max_hours + 1
        )
        assert await task_failures(dev_client, run_id) == []
        # A cancel whose reason is no string (and comes with an extra argument) still cancels.
        await handle.signal("cancel", args=[{"reason": "not a string"}, 7])
        result = await asyncio.wait_for(api.wait_result(dev_client, run_id), timeout=CAP)

    assert result.outcome == "cancelled"
    assert await task_failures(dev_client, run_id) == []
    assert await wait_no_agent_processes(run_id) == []
    assert running_sandboxes(run_id) == []
