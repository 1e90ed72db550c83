"""The last words kept of an agent: small, whole lines, and no secret in any piece."""

from __future__ import annotations

from overnight.output_tail import (
    REDACTED,
    TAIL_BYTES,
    TAIL_LINES,
    cut_tail,
    markdown_block,
    redact,
    secret_values,
    window_bytes,
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
