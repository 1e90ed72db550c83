"""`overnight logs` and `overnight inspect` refuse bad input with one line (exit 2), before
connecting anywhere; a run that is not there is one line too (exit 1)."""

from __future__ import annotations

import pytest

from tests.cli.test_cli import run_cli


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (("logs", "r", "--attempt", "0"), "--attempt must be 1 or more"),
        (("logs", "r", "--tail", "-3"), "--tail must be 1 or more"),
        (("inspect", "r", "../../etc/passwd"), "inspect looks under /workspace only"),
        (("inspect", "r", "/etc/passwd"), "inspect looks under /workspace only"),
    ],
)
def test_bad_logs_and_inspect_input_exits_2_with_one_line(
    capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], says: str
) -> None:
    code, out, err = run_cli(capsys, *argv)
    assert code == 2
    assert says in err and len(err.strip().splitlines()) == 1
    assert out == ""
