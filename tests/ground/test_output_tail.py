"""The last words kept of an agent: small, whole lines, and no secret in any piece."""

from __future__ import annotations

import json

import pytest

from overnight.core.output_tail import (
    REDACTED,
    REDACTION_MARGIN_BYTES,
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


# ---- the window a tail is read from ----------------------------------------------------------


def test_the_window_holds_the_tail_and_a_margin_as_long_as_the_longest_secret_spelled() -> None:
    assert window_bytes([]) == TAIL_BYTES + REDACTION_MARGIN_BYTES
    assert window_bytes([SECRET]) == TAIL_BYTES + REDACTION_MARGIN_BYTES
    # Percent-encoded (`-` as `%2D`, `é` as `%C3%A9`), a secret takes up to 3 bytes a byte.
    assert window_bytes([SECRET, LONG_SECRET]) == TAIL_BYTES + 3 * len(LONG_SECRET)
    assert window_bytes(["é" * 600]) == TAIL_BYTES + 3600
    assert window_bytes(["a" * 600]) == TAIL_BYTES + 1200  # its hex


def test_a_secret_longer_than_1_kib_before_one_long_line_leaves_no_piece_in_its_tail() -> None:
    # One long line (kept whole: its end is the news) right after a 1.6 KiB secret, the tail
    # beginning 95 characters before the secret's end: the window must hold all the secret,
    # so that it is redacted whole, not shown from where a 1 KiB margin would have cut it.
    whole = b"x" * 9000 + LONG_SECRET.encode() + b"y" * 4000 + b"\n"
    tail = cut_tail(whole[-window_bytes([LONG_SECRET]) :], [LONG_SECRET], from_start=False)
    assert tail.text == REDACTED + "y" * 4000


def line(n: int, width: int = 300) -> str:
    return f"{n:04d} " + "x" * (width - 5)


def test_a_window_read_drops_its_first_line_which_is_a_piece() -> None:
    data = "".join(line(n) + "\n" for n in range(100)).encode()
    tail = cut_tail(data[-window_bytes([]) :], [], from_start=False)
    # 13 whole lines of 301 bytes fit in the tail's 4096; the piece before them is dropped.
    assert tail.text.splitlines() == [line(n) for n in range(87, 100)]
    assert tail.truncated


def test_a_window_read_of_two_lines_keeps_only_the_second() -> None:
    data = b"x" * 3000 + b"\n" + b"z" * 2000
    assert cut_tail(data, [], from_start=False).text == "z" * 2000


def test_a_window_read_drops_the_first_line_of_its_tail_even_when_it_happens_to_be_whole() -> None:
    # Cut where a line begins: the reader cannot tell it from a piece, so it goes too.
    data = ("a" * 100 + "\n" + "".join(line(n, 511) + "\n" for n in range(8))).encode()
    assert len(data) - TAIL_BYTES == 101
    tail = cut_tail(data, [], from_start=False)
    assert tail.text.splitlines() == [line(n, 511) for n in range(1, 8)]


def test_a_window_read_no_longer_than_the_tail_keeps_its_only_line_whole() -> None:
    tail = cut_tail(b"only line", [], from_start=False)
    assert (tail.text, tail.truncated) == ("only line", True)


# ---- lines and bytes -------------------------------------------------------------------------


def test_exactly_forty_lines_are_kept_whole_and_not_truncated() -> None:
    data = "".join(f"line {n}\n" for n in range(TAIL_LINES)).encode()
    tail = cut_tail(data, [], from_start=True)
    assert tail.text.splitlines() == [f"line {n}" for n in range(TAIL_LINES)]
    assert not tail.truncated


def test_whole_lines_are_dropped_one_at_a_time_until_the_tail_fits_four_kib() -> None:
    # 31 lines of 501 bytes: the last 8 fit (4007 bytes), 9 would not.
    data = "".join(line(n, 500) + "\n" for n in range(31)).encode()
    tail = cut_tail(data, [], from_start=True)
    assert tail.text.splitlines() == [line(n, 500) for n in range(23, 31)]
    assert tail.truncated


def test_a_few_lines_over_four_kib_are_truncated() -> None:
    data = "".join(line(n, 500) + "\n" for n in range(10)).encode()
    tail = cut_tail(data, [], from_start=True)
    assert tail.text.splitlines() == [line(n, 500) for n in range(2, 10)]
    assert tail.truncated is True


def test_one_long_line_keeps_its_last_four_kib_in_whole_characters() -> None:
    # 10001 bytes: the last 4096 begin inside an "é", which is left out.
    tail = cut_tail(("é" * 5000 + "x").encode(), [], from_start=True)
    assert tail.text == "é" * 2047 + "x"
    assert tail.truncated


def test_output_that_is_not_utf_8_is_shown_with_replacement_characters() -> None:
    tail = cut_tail(b"ok \xff\xfe done\n", [], from_start=True)
    assert tail.text == "ok \ufffd\ufffd done"


# ---- redaction -------------------------------------------------------------------------------


def test_a_secret_that_begins_with_another_is_redacted_whole() -> None:
    assert redact("key=abcdef.", ["abc", "abcdef"]) == f"key={REDACTED}."


def test_a_secret_ending_where_the_kept_text_begins_leaves_nothing_behind() -> None:
    text = f"x{SECRET}tail"
    assert redact(text, [SECRET], start=1 + len(SECRET)) == "tail"


def test_a_secret_after_one_before_the_start_is_still_redacted() -> None:
    text = f"{SECRET} and {SECRET}"
    assert redact(text, [SECRET], start=len(SECRET) + 1) == f"and {REDACTED}"


def test_the_first_four_characters_of_a_secret_at_the_cut_end_are_redacted() -> None:
    assert redact(f"{SECRET}sk-l", [SECRET], cut_end=True) == REDACTED + REDACTED
    assert cut_tail(b"sk-l", [SECRET], from_start=True).text == REDACTED


def test_the_longest_beginning_of_any_secret_at_the_cut_end_is_redacted() -> None:
    # "bcde" begins one secret and "abcde" another: the longer goes.
    assert redact("xxabcde", ["bcdeQQQQQQ", "abcdeQ"], cut_end=True) == f"xx{REDACTED}"
    # "abcdef" begins one secret, "bcdef" another: a shorter one found later changes nothing.
    assert redact("xxabcdef", ["abcdefZZZZZZZZ", "bcdefYYY"], cut_end=True) == f"xx{REDACTED}"


def test_a_beginning_of_a_secret_is_found_though_its_last_character_repeats() -> None:
    # The output ends with "a1b2c3d4-", the secret begins "a1b2c3d4--".
    assert redact("log a1b2c3d4-", ["a1b2c3d4--tail"], cut_end=True) == f"log {REDACTED}"


def test_secret_values_skip_unset_variables_wherever_they_are_named() -> None:
    assert secret_values(["MISSING", "EMPTY", "A"], {"EMPTY": "", "A": "value-a"}) == ["value-a"]


def test_a_markdown_block_uses_three_backticks_unless_the_text_needs_more() -> None:
    assert markdown_block("plain") == "```text\nplain\n```"
    assert markdown_block("```x").startswith("````text\n")
