"""The deployment examples in deploy/ say what the worker does: the container recipe, the
systemd unit and the Kubernetes Deployment stop it with SIGTERM and wait STOP_TIMEOUT (the
worker's graceful shutdown and a margin) before SIGKILL, and every setting they name is
documented.

What runs here (no container runtime or cluster on the test machine): the Kubernetes YAML is
validated against Kubernetes' own schemas (`kubernetes-validate --strict`) and checked field by
field, the unit goes through `systemd-analyze verify` (with its paths pointed at this
checkout), and the Dockerfile is linted by hadolint and its instructions are parsed and checked
(stages, what they copy, what they install, the user, the stop signal). docs/production.md says
the same."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from temporalio.envconfig import ClientConfig

from overnight.worker.runner import GRACEFUL_SHUTDOWN, STOP_TIMEOUT

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
DOCKERFILE = DEPLOY / "container" / "Dockerfile"
UNIT = DEPLOY / "systemd" / "overnight-worker@.service"
ENV_FILE = DEPLOY / "systemd" / "worker.env"
KUBERNETES = DEPLOY / "kubernetes" / "worker.yaml"
SETTINGS_DOCS = (REPO / "docs" / "workers.md", REPO / "docs" / "production.md")
STOP_SECONDS = int(STOP_TIMEOUT.total_seconds())
SETTING = re.compile(r"^(?:OVERNIGHT|TEMPORAL|RUNTIME)_[A-Z0-9_]+$")

DOCKERFILE_INSTRUCTIONS = {
    "ADD", "ARG", "CMD", "COPY", "ENTRYPOINT", "ENV", "EXPOSE", "FROM", "HEALTHCHECK", "LABEL",
    "MAINTAINER", "ONBUILD", "RUN", "SHELL", "STOPSIGNAL", "USER", "VOLUME", "WORKDIR",
}  # fmt: skip


def documented(name: str) -> bool:
    return any(f"`{name}`" in page.read_text() for page in SETTINGS_DOCS)


def test_the_stop_timeout_covers_the_graceful_shutdown_with_room_for_the_shutdown_itself() -> None:
    assert STOP_TIMEOUT > GRACEFUL_SHUTDOWN
    assert STOP_TIMEOUT.total_seconds() == STOP_SECONDS


# --- Kubernetes --------------------------------------------------------------------------


def kubernetes_objects() -> dict[str, dict[str, Any]]:
    documents = [doc for doc in yaml.safe_load_all(KUBERNETES.read_text()) if doc]
    return {doc["kind"]: doc for doc in documents}


def dev_tool(name: str) -> str:
    """A command installed with the dev dependencies, beside this Python."""
    found = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    assert found, f"{name} is missing: reinstall the dev dependencies (scripts/venv.sh)"
    return found


def test_the_kubernetes_objects_match_kubernetes_schemas() -> None:
    done = subprocess.run(
        [dev_tool("kubernetes-validate"), "--strict", "--quiet", str(KUBERNETES)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_deployment_waits_the_workers_stop_timeout_and_rolls_without_a_gap() -> None:
    deployment = kubernetes_objects()["Deployment"]
    assert deployment["apiVersion"] == "apps/v1"
    spec = deployment["spec"]
    pod = spec["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] == STOP_SECONDS
    assert spec["strategy"]["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": 0}
    assert spec["replicas"] >= 2
    labels = spec["template"]["metadata"]["labels"]
    assert spec["selector"]["matchLabels"].items() <= labels.items()
    (container,) = pod["containers"]
    assert container["image"].endswith(":runtime")  # no bubblewrap: it needs no privileges
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert pod["securityContext"]["runAsNonRoot"] is True
    mounts = {mount["mountPath"] for mount in container["volumeMounts"]}
    assert "/var/lib/overnight" in mounts  # OVERNIGHT_HOME, writable under a read-only root


def test_the_deployment_reads_its_settings_from_the_config_map_beside_it() -> None:
    objects = kubernetes_objects()
    config = objects["ConfigMap"]
    (container,) = objects["Deployment"]["spec"]["template"]["spec"]["containers"]
    sources = {next(iter(ref)): next(iter(ref.values()))["name"] for ref in container["envFrom"]}
    assert sources["configMapRef"] == config["metadata"]["name"]
    metrics_port = int(config["data"]["OVERNIGHT_METRICS_ADDRESS"].rsplit(":", 1)[1])
    assert {"name": "metrics", "containerPort": metrics_port} in container["ports"]
    for name in config["data"]:
        assert SETTING.match(name) and documented(name), name


# --- systemd ---------------------------------------------------------------------------


def unit_settings(text: str) -> dict[str, dict[str, list[str]]]:
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            current = sections.setdefault(line.strip("[]"), {})
            continue
        key, _, value = line.partition("=")
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


def test_the_unit_stops_the_worker_alone_with_sigterm_and_waits_its_stop_timeout() -> None:
    service = unit_settings(UNIT.read_text())["Service"]
    assert service["KillSignal"] == ["SIGTERM"]
    assert service["TimeoutStopSec"] == [str(STOP_SECONDS)]
    assert service["KillMode"] == ["process"]  # local agents outlive a worker's restart
    assert service["ExecStart"][0].endswith(" /opt/overnight/worker.py")
    assert service["Environment"] == [
        "OVERNIGHT_HOME=/var/lib/overnight",
        "OVERNIGHT_METRICS_ADDRESS=0.0.0.0:946%i",  # a port per instance of the template
    ]
    assert "RestrictNamespaces" not in service and "NoNewPrivileges" not in service


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze here")
def test_the_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    env_file = tmp_path / "worker.env"
    shutil.copy(ENV_FILE, env_file)
    text = (
        UNIT.read_text()
        .replace("/opt/overnight/.venv/bin/python", sys.executable)
        .replace("/opt/overnight/worker.py", str(REPO / "worker.py"))
        .replace("WorkingDirectory=/opt/overnight", f"WorkingDirectory={REPO}")
        .replace("/etc/overnight/worker.env", str(env_file))
    )
    instance = tmp_path / UNIT.name.replace("@.", "@1.")  # the template, as instance 1
    instance.write_text(text)
    done = subprocess.run(
        ["systemd-analyze", "verify", str(instance)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    # What it ignores with a warning (an unknown key, a bad signal name) fails here too.
    complaints = [line for line in done.stderr.splitlines() if instance.name in line]
    assert not complaints, complaints


def test_the_env_file_names_only_documented_settings() -> None:
    names = set()
    for line in ENV_FILE.read_text().splitlines():
        found = re.match(r"^#?\s*([A-Z][A-Z0-9_]*)=", line.strip())
        if found:
            names.add(found.group(1))
    assert {"TEMPORAL_ADDRESS", "TEMPORAL_NAMESPACE", "TEMPORAL_API_KEY"} <= names
    for name in names:
        assert SETTING.match(name) and documented(name), name


def test_an_api_key_in_the_environment_connects_with_tls_as_the_docs_say() -> None:
    config = ClientConfig.load_client_connect_config(
        disable_file=True,
        override_env_vars={
            "TEMPORAL_ADDRESS": "my-namespace.a1b2c.tmprl.cloud:7233",
            "TEMPORAL_NAMESPACE": "my-namespace.a1b2c",
            "TEMPORAL_API_KEY": "key",
        },
    )
    assert config == {
        "target_host": "my-namespace.a1b2c.tmprl.cloud:7233",
        "namespace": "my-namespace.a1b2c",
        "api_key": "key",
        "tls": True,
    }


# --- the container recipe ----------------------------------------------------------------


def dockerfile_instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order: comments dropped, continuations joined."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        pending = f"{pending} {line}".strip()
        if pending.endswith("\\"):
            pending = pending[:-1]
            continue
        keyword, _, arguments = pending.partition(" ")
        instructions.append((keyword.upper(), " ".join(arguments.split())))
        pending = ""
    assert not pending, f"a continuation runs off the end: {pending!r}"
    return instructions


def stages(instructions: list[tuple[str, str]]) -> dict[str, list[tuple[str, str]]]:
    found: dict[str, list[tuple[str, str]]] = {}
    for keyword, arguments in instructions:
        if keyword == "FROM":
            base, _, name = arguments.partition(" AS ")
            current = found.setdefault(name, [("FROM", base)])
        else:
            current.append((keyword, arguments))
    return found


def test_the_dockerfile_builds_a_runtime_stage_and_a_local_sandbox_stage_on_it() -> None:
    instructions = dockerfile_instructions(DOCKERFILE.read_text())
    assert {keyword for keyword, _ in instructions} <= DOCKERFILE_INSTRUCTIONS
    built = stages(instructions)
    assert list(built) == ["runtime", "local"]  # the last, the default target, has bubblewrap
    runtime, local = built["runtime"], built["local"]
    assert runtime[0] == ("FROM", "python:3.11-slim-bookworm")
    assert local[0] == ("FROM", "runtime")
    for keyword, arguments in runtime:
        if keyword == "COPY":
            *sources, _ = arguments.split()
            for source in sources:
                assert (REPO / source).exists(), source
    installs = " ".join(arguments for keyword, arguments in local if keyword == "RUN")
    for package in ("bubblewrap", "slirp4netns", "git"):
        assert re.search(rf"apt-get install .*\b{package}\b", installs), package
    assert "bubblewrap" not in " ".join(arguments for _, arguments in runtime)
    assert [arguments for keyword, arguments in local if keyword == "USER"][-1] == "10001:10001"
    assert ("STOPSIGNAL", "SIGTERM") in runtime
    (entrypoint,) = [
        json.loads(arguments) for keyword, arguments in runtime if keyword == "ENTRYPOINT"
    ]
    assert entrypoint == ["python", "/opt/overnight/worker.py"]
    assert ("WORKDIR", "/opt/overnight") in runtime and (REPO / "worker.py").exists()


def test_hadolint_finds_nothing_in_the_dockerfile() -> None:
    done = subprocess.run(
        [dev_tool("hadolint"), "--no-color", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and not done.stdout.strip(), done.stdout + done.stderr


def test_the_dockerfile_sets_only_documented_settings_and_leaves_the_venv_out() -> None:
    instructions = dockerfile_instructions(DOCKERFILE.read_text())
    names = [
        name
        for keyword, arguments in instructions
        if keyword == "ENV"
        for name in re.findall(r"([A-Z][A-Z0-9_]*)=", arguments)
        if SETTING.match(name)
    ]
    assert names == ["OVERNIGHT_HOME"]
    assert all(documented(name) for name in names)
    ignored = (DOCKERFILE.parent / "Dockerfile.dockerignore").read_text().split()
    assert ".venv" in ignored and ".git" in ignored
