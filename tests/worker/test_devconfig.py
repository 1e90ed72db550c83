"""temporal-dev.yaml: strict loading with errors that name the key, and the server's arguments."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from overnight.core.constants import SEARCH_ATTRIBUTE_TYPES
from overnight.worker.devconfig import DevConfig, DevConfigError, load_dev_config

REPO_CONFIG = Path(__file__).resolve().parents[2] / "temporal-dev.yaml"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "temporal-dev.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def flag_values(args: list[str], flag: str) -> list[str]:
    return [args[i + 1] for i, arg in enumerate(args) if arg == flag]


def test_repo_config_registers_the_design_search_attributes_on_the_default_ports() -> None:
    config = load_dev_config(REPO_CONFIG)
    assert config.search_attributes == SEARCH_ATTRIBUTE_TYPES
    assert (config.ip, config.port, config.ui_port, config.namespace) == (
        "127.0.0.1",
        7233,
        8233,
        "default",
    )
    assert config.address == "127.0.0.1:7233"
    assert config.ui_url == "http://127.0.0.1:8233"


def test_unknown_key_is_refused_naming_the_key(tmp_path: Path) -> None:
    path = write(tmp_path, "port: 7233\nui_prot: 8233\n")
    with pytest.raises(DevConfigError, match=r"ui_prot: unknown key"):
        load_dev_config(path)


def test_wrong_type_is_refused_naming_the_key(tmp_path: Path) -> None:
    path = write(tmp_path, "port: seven\n")
    with pytest.raises(DevConfigError, match=r"port: .*integer.*'seven'"):
        load_dev_config(path)


def test_nested_bad_value_names_the_full_key(tmp_path: Path) -> None:
    path = write(tmp_path, "search_attributes:\n  OvernightState: Keywords\n")
    with pytest.raises(DevConfigError, match=r"search_attributes\.OvernightState: "):
        load_dev_config(path)


def test_port_out_of_range_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "ui_port: 70000\n")
    with pytest.raises(DevConfigError, match=r"ui_port: "):
        load_dev_config(path)


@pytest.mark.parametrize(
    ("text", "message"),
    [("- a\n- b\n", "expected a mapping"), ("port: [\n", "not valid YAML")],
)
def test_a_file_that_is_not_a_mapping_is_refused(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(DevConfigError, match=message):
        load_dev_config(write(tmp_path, text))


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(DevConfigError, match="cannot read"):
        load_dev_config(tmp_path / "absent.yaml")


def test_paths_expand_the_state_directory_and_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OVERNIGHT_HOME", str(tmp_path / "state"))
    path = write(tmp_path, "db_file: ${OVERNIGHT_HOME}/temporal/dev.sqlite\nlog_file: ~/x.log\n")
    config = load_dev_config(path)
    assert config.db_file == tmp_path / "state" / "temporal" / "dev.sqlite"
    assert config.log_file == Path.home() / "x.log"


def test_state_directory_defaults_to_dot_overnight_in_home(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OVERNIGHT_HOME", raising=False)
    assert DevConfig().db_file == Path.home() / ".overnight" / "temporal" / "dev.sqlite"


def test_start_dev_args_carry_every_setting() -> None:
    config = load_dev_config(REPO_CONFIG).with_overrides(
        port=17233, ui_port=18233, db_file=Path("/tmp/x/dev.sqlite")
    )
    args = config.start_dev_args("/bin/temporal")
    assert args[:3] == ["/bin/temporal", "server", "start-dev"]
    assert flag_values(args, "--ip") == ["127.0.0.1"]
    assert flag_values(args, "--port") == ["17233"]
    assert flag_values(args, "--ui-port") == ["18233"]
    assert flag_values(args, "--namespace") == ["default"]
    assert flag_values(args, "--db-filename") == ["/tmp/x/dev.sqlite"]
    assert flag_values(args, "--log-level") == ["warn"]
    assert "--ui-disable-news-fetch" in args
    assert sorted(flag_values(args, "--search-attribute")) == sorted(
        f"{name}={kind}" for name, kind in SEARCH_ATTRIBUTE_TYPES.items()
    )
    dynamic = dict(v.split("=", 1) for v in flag_values(args, "--dynamic-config-value"))
    assert json.loads(dynamic["frontend.enableUpdateWorkflowExecution"]) is True


def test_dynamic_config_values_are_passed_as_json(tmp_path: Path) -> None:
    path = write(tmp_path, 'dynamic_config:\n  limit.x: 5\n  a.b: "text"\n  c.d: [1, 2]\n')
    args = load_dev_config(path).start_dev_args("temporal")
    assert flag_values(args, "--dynamic-config-value") == ["limit.x=5", 'a.b="text"', "c.d=[1, 2]"]


def test_ui_off_starts_headless() -> None:
    args = DevConfig(ui=False).start_dev_args("temporal")
    assert "--headless" in args
    assert "--ui-port" not in args


def test_overrides_are_checked_like_the_file() -> None:
    with pytest.raises(ValueError, match="port"):
        DevConfig().with_overrides(port=0)


def test_wildcard_ip_is_dialled_through_loopback() -> None:
    assert DevConfig(ip="0.0.0.0", port=7000, ui_port=8000).address == "127.0.0.1:7000"
    assert DevConfig(ip="::1").ui_url == "http://[::1]:8233"


def test_a_ui_codec_endpoint_reaches_the_web_ui_and_is_off_by_default(tmp_path: Path) -> None:
    assert "--ui-codec-endpoint" not in load_dev_config(REPO_CONFIG).start_dev_args("temporal")
    path = write(tmp_path, "ui_codec_endpoint: http://127.0.0.1:8081\n")
    args = load_dev_config(path).start_dev_args("temporal")
    assert flag_values(args, "--ui-codec-endpoint") == ["http://127.0.0.1:8081"]
    headless = DevConfig(ui=False, ui_codec_endpoint="http://127.0.0.1:8081")
    assert "--ui-codec-endpoint" not in headless.start_dev_args("temporal")
    with pytest.raises(DevConfigError, match="ui_codec_endpoint"):
        load_dev_config(write(tmp_path, "ui_codec_endpoint: 127.0.0.1:8081\n"))
