"""Local sandboxes isolated with bubblewrap, on real sandboxes: what an agent can see and touch,
what stop, pause and wake reach, the limits, and `isolation: "none"`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from activities.providers.local import cgroups
from activities.providers.local.convert import sandbox_info
from activities.providers.local.engine import LocalEngine
from activities.providers.local.mounts import shim_python
from activities.providers.local.procs import ProcessRecord
from overnight.core.isolation import HostBind
from tests.waits import CAP

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[LocalEngine]:
    engine = LocalEngine(tmp_path / "home")
    yield engine
    for meta in engine.list_sandboxes():
        engine.stop(meta.id)


def sandbox(engine: LocalEngine, **options: object) -> str:
    name = f"iso-{uuid.uuid4().hex[:8]}"
    engine.get_or_create(name, timeout_seconds=120, **options)  # type: ignore[arg-type]
    return name


def wait_ended(engine: LocalEngine, sid: str, pid: str, timeout: float = CAP) -> ProcessRecord:
    give_up = time.monotonic() + timeout
    while True:
        record = engine.process(sid, pid)
        assert record is not None
        if record.state != "running" or time.monotonic() > give_up:
            return record
        time.sleep(0.05)


def marked(marker: str) -> dict[int, str]:
    """Host processes whose environment holds `marker`, with their state letter."""
    found = {}
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and marker.encode() in (proc / "environ").read_bytes():
                found[int(proc.name)] = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
    return {pid: state for pid, state in found.items() if state != "Z"}


def wait_for(check: object, timeout: float = CAP) -> bool:
    give_up = time.monotonic() + timeout
    while time.monotonic() < give_up:
        if check():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return False


def test_the_host_is_read_only_and_tmp_is_the_sandboxs_own(engine: LocalEngine) -> None:
    sid = sandbox(engine)
    name = f"overnight-escape-{uuid.uuid4().hex[:8]}"
    host_home = Path.home() / name
    script = f"""
        touch {host_home} 2>/dev/null && echo home-written || echo home-refused
        touch /etc/{name} 2>/dev/null && echo etc-written || echo etc-refused
        echo kept > /tmp/{name} && echo tmp-written
        echo mine > /workspace/made-here && pwd
    """
    out = engine.run(sid, textwrap.dedent(script), cwd="/workspace")
    assert out.stdout.split() == ["home-refused", "etc-refused", "tmp-written", "/workspace"]
    assert not host_home.exists() and not Path("/etc", name).exists()
    assert not Path("/tmp", name).exists(), "the sandbox's /tmp is not the host's"
    assert engine.host_path(sid, "/workspace/made-here").read_text() == "mine\n"
    # /tmp is the sandbox's for its whole life, not one command's.
    assert engine.run(sid, f"cat /tmp/{name}").stdout == "kept\n"
    assert engine.run(sandbox(engine), f"cat /tmp/{name}").exit_code != 0


def test_an_agent_sees_only_its_own_processes_not_the_workers(engine: LocalEngine) -> None:
    sid = sandbox(engine)
    probe = f"ls /proc | grep -E '^[0-9]+$' > /workspace/pids; kill -0 {os.getpid()} 2>&1; echo $?"
    record, _ = engine.start_process(sid, "k-1", f"({probe}) > /workspace/seen", cwd="/workspace")
    assert wait_ended(engine, sid, record.process_id).exit_code == 0
    pids = {int(p) for p in engine.host_path(sid, "/workspace/pids").read_text().split()}
    assert os.getpid() not in pids and max(pids) < 10, pids
    assert engine.host_path(sid, "/workspace/seen").read_text().split()[-1] == "1"


def test_stop_kills_every_process_of_the_sandbox_setsid_daemons_too(engine: LocalEngine) -> None:
    sid = sandbox(engine)
    marker = f"MARK_{uuid.uuid4().hex}"
    daemons = "setsid sleep 300 & (setsid nohup bash -c 'sleep 300' >/dev/null 2>&1 &); sleep 300"
    engine.start_process(sid, "k-1", daemons, cwd="/workspace", env={marker: "1"})
    assert wait_for(lambda: len(marked(marker)) >= 4), marked(marker)

    engine.stop(sid)

    assert wait_for(lambda: not marked(marker)), f"left alive: {marked(marker)}"


def test_pause_freezes_every_process_of_the_sandbox_and_wake_thaws_them(
    engine: LocalEngine,
) -> None:
    sid = sandbox(engine)
    marker = f"MARK_{uuid.uuid4().hex}"
    engine.start_process(
        sid, "k-1", "setsid sleep 300 & sleep 300", cwd="/workspace", env={marker: "1"}
    )
    assert wait_for(lambda: len(marked(marker)) >= 4)
    started = json.loads((engine.folder(sid) / "processes" / "k-1" / "process.json").read_text())
    meta = engine.get(sid)
    assert meta.cgroup is not None, meta.no_cgroup
    # Every process of it is in its cgroup; the launcher outside it keeps watching.
    inside = set(marked(marker)) - {started["launcher_pid"]}
    assert inside <= cgroups.members(meta.cgroup), (inside, cgroups.members(meta.cgroup))
    assert started["launcher_pid"] not in cgroups.members(meta.cgroup)

    engine.pause(sid)
    assert cgroups.frozen(meta.freezer, meta.cgroup)
    engine.wake(sid)
    assert not cgroups.frozen(meta.freezer, meta.cgroup)


def test_the_lease_end_freezes_every_process_of_the_sandbox(engine: LocalEngine) -> None:
    name = f"iso-{uuid.uuid4().hex[:8]}"
    meta, _ = engine.get_or_create(name, timeout_seconds=1.0, on_lease_end="pause")
    assert meta.cgroup is not None, meta.no_cgroup
    engine.start_process(name, "k-1", "setsid sleep 300 & sleep 300", cwd="/workspace")

    def paused() -> bool:  # frozen first, then marked paused
        return json.loads((engine.folder(name) / "sandbox.json").read_text())["state"] == "paused"

    # Nobody asks the engine: the agent's launcher pauses the sandbox at the lease end.
    assert wait_for(paused)
    assert cgroups.frozen(meta.freezer, meta.cgroup)


def test_an_exit_code_and_a_signal_are_told_apart(engine: LocalEngine) -> None:
    sid = sandbox(engine)
    exited, _ = engine.start_process(sid, "k-1", "exit 137", cwd="/workspace")
    killed, _ = engine.start_process(sid, "k-2", "kill -KILL $$", cwd="/workspace")
    ended = wait_ended(engine, sid, exited.process_id)
    assert (ended.state, ended.exit_code) == ("exited", 137)
    assert wait_ended(engine, sid, killed.process_id).state == "killed"


def test_binds_are_read_only_unless_declared_writable(engine: LocalEngine, tmp_path: Path) -> None:
    shown, shared = tmp_path / "shown", tmp_path / "shared"
    shown.mkdir()
    shared.mkdir()
    (shown / "data.txt").write_text("facts\n")
    # The sandbox's user (a user of its own, for a root worker) must be let in, as any user.
    shown.chmod(0o755)
    shared.chmod(0o777)
    binds = (HostBind(path=str(shown)), HostBind(path=str(shared), writable=True))
    sid = sandbox(engine, binds=binds)
    script = f"""
        cat {shown}/data.txt
        touch {shown}/new 2>/dev/null && echo shown-written || echo shown-refused
        echo result > {shared}/out.txt && echo shared-written
    """
    out = engine.run(sid, textwrap.dedent(script))
    assert out.stdout.split() == ["facts", "shown-refused", "shared-written"]
    assert not (shown / "new").exists()
    assert (shared / "out.txt").read_text() == "result\n"


@pytest.mark.skipif(os.geteuid() != 0, reason="sandboxes have a user of their own under root")
def test_a_bind_the_sandboxs_user_may_not_read_is_refused_saying_how_to_allow_it(
    engine: LocalEngine, tmp_path: Path
) -> None:
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    with pytest.raises(Exception, match=r"chmod o\+rx .*OVERNIGHT_SANDBOX_UIDS=0"):
        sandbox(engine, binds=(HostBind(path=str(private)),))
    assert engine.list_sandboxes() == []  # refused before anything was made


def test_a_bind_that_does_not_exist_is_refused(engine: LocalEngine, tmp_path: Path) -> None:
    with pytest.raises(Exception, match="does not exist on this worker"):
        sandbox(engine, binds=(HostBind(path=str(tmp_path / "nowhere")),))


def test_overnights_state_and_other_sandboxes_are_hidden() -> None:
    # A state folder outside /tmp (which a sandbox does not see anyway), as ~/.overnight is.
    home = Path(tempfile.mkdtemp(prefix=".overnight-test-", dir=Path.home()))
    engine = LocalEngine(home)
    try:
        other, mine = sandbox(engine), sandbox(engine)
        engine.write_file(other, "/workspace/secret.txt", b"not yours")
        seen = engine.run(mine, f"ls -A {home}; cat {engine.folder(other)}/workspace/secret.txt")
        assert "not yours" not in seen.stdout
        assert seen.stdout.split() == []  # its home is /home/sandbox: no host path shows
    finally:
        for meta in engine.list_sandboxes():
            engine.stop(meta.id)
        shutil.rmtree(home)


def test_memory_is_limited_and_the_status_says_how(engine: LocalEngine) -> None:
    sid = sandbox(engine, memory_mib=64)
    hog = engine.run(sid, f"{shim_python()} -c 'bytearray(256 * 1024 * 1024)'")
    meta = engine.get(sid)
    # A cgroup's limit kills the hog (the kernel's OOM killer); prlimit's refuses its memory.
    assert hog.exit_code != 0
    assert meta.limits != "prlimit" or "MemoryError" in hog.stderr
    assert meta.limits in ("cgroup", "systemd", "prlimit")
    text = sandbox_info(meta).isolation
    assert text is not None
    assert text.startswith("isolated (bubblewrap): ") and "only /workspace writable" in text
    assert "64 MiB" in text


def test_isolation_none_runs_on_the_host_and_says_so(engine: LocalEngine) -> None:
    sid = sandbox(engine, isolation="none")
    out = engine.run(sid, "pwd; echo /workspace/x", cwd="/workspace")
    # No mount: /workspace is the sandbox's folder by rewriting, as before isolation.
    folder = engine.host_path(sid, "/workspace")
    assert out.stdout.split() == [str(folder), f"{folder}/x"]
    text = sandbox_info(engine.get(sid)).isolation
    assert text is not None and text.startswith("not isolated (isolation: none)")


def test_a_sandbox_is_refused_with_the_fix_where_bubblewrap_cannot_run(tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        from activities.providers.local.engine import LocalEngine
        from activities.providers.protocol import ProviderError
        engine = LocalEngine({str(tmp_path / "home")!r})
        try:
            engine.get_or_create("refused")
        except ProviderError as error:
            print(error.kind, error.retryable, error, sep="|")
        print(engine.get_or_create("opted-out", isolation="none")[0].isolation)
        """
    )
    # No bwrap on this PATH: as on a machine without bubblewrap.
    env = {**os.environ, "PATH": str(tmp_path / "empty-bin")}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60
    )
    refused, opted_out = done.stdout.splitlines()
    kind, retryable, message = refused.split("|")
    assert (kind, retryable) == ("IsolationUnavailable", "False")
    assert "bwrap is not installed" in message
    assert "apt-get install bubblewrap" in message and '"isolation": "none"' in message
    assert opted_out == "none"


def test_commands_in_a_sandbox_leave_no_fd_open_in_the_worker(engine: LocalEngine) -> None:
    """A worker lives for weeks and runs commands in sandboxes for every run (the clone, the
    checkout): each left bwrap's info pipe open."""
    sid = sandbox(engine)
    engine.run(sid, "true")  # the first one warms what stays open for good (logging, caches)
    before = set(os.listdir("/proc/self/fd"))
    for _ in range(3):
        assert engine.run(sid, "echo hi").stdout == "hi\n"
    assert set(os.listdir("/proc/self/fd")) - before == set()
