"""The last words kept of an agent: small, whole lines, and no secret in any piece."""

from __future__ import annotations

import json

import pytest

from overnight.output_tail import (
    REDACTED,
    TAIL_BYTES,
    TAIL_LINES,
    cut_tail,
    markdown_block,
    redact,
    secret_values,
    window_bytes,
    with_json_forms,
)

SECRET = "sk-live-0123456789abcdef"


def test_a_short_output_is_kept_whole() -> None:
    tail = cut_tail(b"starting\nstep 1 done\nboom\n", [], from_start=True)
    assert (tail.text, tail.truncated) == ("starting\nstep 1 done\nboom", False)


def test_a_long_output_keeps_its_last_forty_lines() -> None:
    data = "".join(f"line {n}\n" for n in range(1, 201)).encode()
    tail = cut_tail(data, [], from_start=True)
    assert tail.text.splitlines() == [f"line {n}" for n in range(201 - TAIL_LINES, 201)]
    assert tail.truncated


def test_long_lines_keep_the_tail_within_four_kib() -> None:
    data = "".join(f"{n:04d} " + "x" * 500 + "\n" for n in range(30)).encode()
    tail = cut_tail(data, [], from_start=True)
    assert len(tail.text.encode()) <= TAIL_BYTES
    assert tail.text.splitlines()[-1].startswith("0029 ")
    one_line = cut_tail(("é" * 5000).encode(), [], from_start=True)
    assert len(one_line.text.encode()) <= TAIL_BYTES and set(one_line.text) == {"é"}


def test_every_secret_is_redacted_wherever_it_is() -> None:
    data = f"token={SECRET}\nagain:{SECRET}{SECRET}\n".encode()
    tail = cut_tail(data, [SECRET], from_start=True)
    assert SECRET not in tail.text
    assert tail.text == f"token={REDACTED}\nagain:{REDACTED}{REDACTED}"


def test_a_secret_cut_where_the_tail_or_its_window_begins_leaves_no_piece_behind() -> None:
    secrets = [SECRET]
    window = window_bytes(secrets)
    for cut in range(1, len(SECRET)):
        # The kept part begins inside the secret; then the window read begins inside it.
        for after in (TAIL_BYTES - cut, window - len(SECRET) + cut):
            whole = ("x" * 6000 + SECRET + "\n" + "y" * (after - 1)).encode()
            tail = cut_tail(whole[-window:], secrets, from_start=False)
            assert tail.text  # something is kept
            # Any piece of 6 characters or more holds one of these.
            for start in range(len(SECRET) - 5):
                assert SECRET[start : start + 6] not in tail.text, (cut, after)


def test_a_piece_of_a_secret_at_the_windows_edge_is_redacted_with_the_margin_in_sight() -> None:
    margin = window_bytes([SECRET]) - TAIL_BYTES
    data = ("a" * (margin - 5) + SECRET + "\n" + "z" * 50 + "\n").encode()
    kept = redact(data.decode(), [SECRET], start=margin)
    assert kept.startswith(REDACTED) and SECRET[-5:] not in kept


def test_secret_values_are_taken_from_the_workers_environment_line_by_line() -> None:
    environ = {"A": "one-value", "B": "-----BEGIN KEY-----\nline-two\n", "C": ""}
    values = secret_values(["A", "B", "C", "MISSING"], environ)
    assert "one-value" in values and "line-two" in values and "-----BEGIN KEY-----" in values
    assert "" not in values


def test_a_markdown_block_cannot_be_closed_by_the_output() -> None:
    block = markdown_block("before\n```\nrm -rf /\n```")
    fence = block.splitlines()[0].removesuffix("text")
    assert fence == "````" and block.endswith("\n````")


LONG_SECRET = "-----BEGIN KEY-----" + "".join(f"{n:04x}" for n in range(400)) + "-----END KEY-----"


def test_a_secret_longer_than_the_margin_cut_where_the_window_begins_leaves_no_piece() -> None:
    assert len(LONG_SECRET) > 1024  # longer than REDACTION_MARGIN_BYTES
    secrets = [LONG_SECRET]
    window = window_bytes(secrets)
    for inside in (1, 17, 500, 1024, 1025, len(LONG_SECRET) - 1):
        # The window read begins `inside` characters before the secret's end.
        after = window - inside
        for tail_lines in ("y" * (after - 1) + "\n", "y\n" * (after // 2)):
            whole = ("x" * 9000 + LONG_SECRET + tail_lines).encode()
            tail = cut_tail(whole[-window:], secrets, from_start=False)
            assert tail.text
            for start in range(0, len(LONG_SECRET) - 8, 7):
                assert LONG_SECRET[start : start + 8] not in tail.text, (inside, start)


@pytest.mark.parametrize("cut", [4, 5, 12, len(SECRET) - 1])
def test_a_secret_cut_off_at_the_end_of_the_output_is_redacted(cut: int) -> None:
    data = f"step 3 done\nexport TOKEN={SECRET[:cut]}".encode()
    tail = cut_tail(data, [SECRET], from_start=True)
    assert tail.text == f"step 3 done\nexport TOKEN={REDACTED}"


def test_a_few_characters_that_happen_to_begin_a_secret_are_left_alone() -> None:
    assert cut_tail(b"ok sk-", [SECRET], from_start=True).text == "ok sk-"
    assert redact("sk-live", [SECRET]) == "sk-live"  # not at a cut end: nothing to hide


def test_a_secret_in_json_is_redacted_in_its_escaped_forms_too() -> None:
    secret = 'pa"ss\\wörd-123'
    text = json.dumps({"a": secret}) + json.dumps({"b": secret}, ensure_ascii=False)
    assert redact(text, with_json_forms([secret])) == f'{{"a": "{REDACTED}"}}{{"b": "{REDACTED}"}}'
