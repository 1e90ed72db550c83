"""A worker with a bad OVERNIGHT_CODEC_KEYS refuses to start, in one line, before it starts or
dials anything (a dev server is not even started)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from overnight.core.codec import CODEC_KEYS_ENV
from tests.conftest import REPO_ROOT, free_ports


@pytest.mark.parametrize("dev", [False, True])
def test_a_worker_with_a_bad_key_refuses_to_start_in_one_line(dev: bool, tmp_path: Path) -> None:
    port, ui_port = free_ports(2)
    config = tmp_path / "temporal-dev.yaml"
    config.write_text(f"port: {port}\nui_port: {ui_port}\ndb_file: {tmp_path}/dev.sqlite\n")
    env = {
        **os.environ,
        CODEC_KEYS_ENV: "k1:c2hvcnQ=",  # 5 bytes
        "TEMPORAL_ADDRESS": f"127.0.0.1:{port}",
    }
    args = [sys.executable, str(REPO_ROOT / "worker.py")]
    args += ["--dev", "--config", str(config)] if dev else []
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr == (
        f"error: {CODEC_KEYS_ENV}: entry 1 (id 'k1'): the key is 5 bytes; AES-256 needs 32 "
        "(e.g. `head -c 32 /dev/urandom | base64`)\n"
    )
    assert not (tmp_path / "dev.sqlite").exists()  # no dev server was started
