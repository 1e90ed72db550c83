"""The real pinned CLIs as the local provider shows them to a coding agent's sandbox
(activities/coding_agent/setup.py): the worker's install bound read-only at
/overnight/agents/<kind>-<version>, never copied, and run from there as the sandbox's own
unprivileged user, with the writable /tmp, traversable /home and writable $HOME the CLIs need."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from activities.coding_agent import setup as coding
from activities.providers.local.engine import LocalEngine
from activities.providers.local.isolation import bwrap_problem
from overnight.core.agent_kinds import agent_cli
from overnight.core.coding_agents import install_folder, sandbox_executable, sandbox_folder
from overnight.core.constants import LABEL_RUN
from overnight.core.models import RunSpec
from overnight.worker.agent_clis import Installed
from tests.agent_clis.conftest import measure
from tests.kinds import KIND_FACTS

pytestmark = pytest.mark.skipif(bwrap_problem() is not None, reason=str(bwrap_problem()))


def link_install(home: Path, installed: Installed) -> None:
    """`home`'s agents folder holding the session's install (a link: the worker's mount
    follows it, as for an install shared between workers)."""
    cli = agent_cli(installed.kind)
    place = install_folder(cli, home)
    place.parent.mkdir(parents=True, exist_ok=True)
    if not place.exists():
        place.symlink_to(installed.folder)


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[LocalEngine]:
    made = LocalEngine(tmp_path / "home")
    yield made
    for meta in made.list_sandboxes():
        made.stop(meta.id)


@pytest.mark.parametrize("kind", sorted(KIND_FACTS))
def test_the_cli_is_mounted_read_only_and_runs_from_there(
    kind: str, engine: LocalEngine, installed_cli: Callable[[str], Installed]
) -> None:
    installed = installed_cli(kind)
    link_install(engine.home, installed)
    cli = agent_cli(kind)
    spec = RunSpec(repo="https://example.com/a.git", agent={"kind": kind, "prompt": "x"})
    spec = spec.model_copy(update={"run_id": f"mount-{kind}"})
    assert coding.refusals(spec, engine.home) == []
    started = time.monotonic()
    meta, _ = engine.get_or_create(
        f"mount-{kind}-1", labels={LABEL_RUN: spec.run_id}, mounts=coding.mounts(spec, engine.home)
    )
    made = time.monotonic() - started
    binary = sandbox_executable(cli, os.uname().machine)
    said = engine.run(
        meta.id,
        f"{binary} --version; touch {sandbox_folder(cli)}/probe 2>&1; "
        f"mount | grep -c ' {sandbox_folder(cli)} '; "
        "mkdir -p $HOME/.claude && echo home-ok; touch /tmp/x && echo tmp-ok; "
        "ls -d /home/sandbox && id -u",
        env=coding.adapter_env(spec),
    )
    out = said.stdout + said.stderr
    assert cli.version_line in out, out
    assert "Read-only file system" in out and "home-ok" in out and "tmp-ok" in out, out
    assert not (installed.folder / "probe").exists()
    if os.geteuid() == 0:
        assert str(meta.uid) in out
    # Never copied: the sandbox's folder holds none of the CLI's ~400 MB.
    held = sum(p.stat().st_size for p in engine.folder(meta.id).rglob("*") if p.is_file())
    assert held < 10_000_000
    measure(f"{kind}: sandbox with its CLI mounted, create (s)", made)
