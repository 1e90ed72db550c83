"""A secret is redacted in the spellings an accident writes it in: base64 (alone or inside the
base64 of a longer text, at any alignment, either alphabet), hex, percent-encoded."""

from __future__ import annotations

import base64
import json
import re
import urllib.parse

import pytest

from overnight.core.output_tail import REDACTED, cut_tail, holds_secret, redact
from overnight.core.secret_spellings import MIN_SPELLED_BYTES, literal_spellings, percent_pattern

# `+`, `/` and `=` in its base64 at some alignment, `&`, space, `/` and `é` to percent-encode.
SECRET = "sk-live-Zm9v/ba+r é&x=1 ~?>>"
PLAIN = "sk-live-0123456789abcdef"


def _b64_variants(data: bytes) -> list[str]:
    standard = base64.b64encode(data).decode()
    return [standard, standard.rstrip("="), base64.urlsafe_b64encode(data).decode()]


@pytest.mark.parametrize("before", ["", "u", "us", "user:", "Basic ", "abcdefgh"])
@pytest.mark.parametrize("after", ["", "!", "!!", "\n-- end of the file --\n"])
def test_base64_of_a_text_holding_the_secret_at_any_alignment_is_redacted(
    before: str, after: str
) -> None:
    data = (before + SECRET + after).encode()
    for spelled in _b64_variants(data):
        shown = redact(f"Authorization: Basic {spelled}\n", [SECRET])
        assert REDACTED in shown, (before, after, spelled)
        left = shown.removeprefix("Authorization: Basic ").strip().replace(REDACTED, "")
        # What stays is the base64 of the neighbours and, at each end, at most two characters
        # (under 12 bits) mixing theirs and the secret's, and the padding.
        neighbours = -(-len(before.encode()) * 4 // 3) + -(-len(after.encode()) * 4 // 3)
        assert len(left) <= neighbours + 2 + 2 + 2, (before, after, shown)


def test_hex_in_either_case_is_redacted() -> None:
    data = SECRET.encode()
    for spelled in (data.hex(), data.hex().upper(), PLAIN.encode().hex()):
        assert redact(f"dump: 00ff{spelled}ff00", [SECRET, PLAIN]) == f"dump: 00ff{REDACTED}ff00"


@pytest.mark.parametrize(
    "spell",
    [
        lambda s: urllib.parse.quote(s, safe=""),
        lambda s: urllib.parse.quote(s),  # `/` left as is
        urllib.parse.quote_plus,  # a form: space as `+`
        lambda s: re.sub("%..", lambda m: m.group().lower(), urllib.parse.quote(s, safe="")),
        lambda s: urllib.parse.quote(s, safe="~()*!'"),  # JavaScript's encodeURIComponent
        lambda s: "".join(
            chr(b) if chr(b).isascii() and chr(b).isalnum() else f"%{b:02X}" for b in s.encode()
        ),
    ],
)
def test_percent_encoded_in_any_way_is_redacted(spell: object) -> None:
    assert callable(spell)
    spelled = spell(SECRET)
    assert spelled != SECRET
    url = f"https://api.example/v1?token={spelled}&page=2"
    assert redact(url, [SECRET]) == f"https://api.example/v1?token={REDACTED}&page=2"


def test_the_secret_as_written_is_still_redacted_and_a_longer_one_whole() -> None:
    longer = SECRET + "-and-more"
    assert redact(f"a {longer} b {SECRET} c", [SECRET, longer]) == f"a {REDACTED} b {REDACTED} c"
    assert holds_secret(base64.b64encode(SECRET.encode()).decode(), [SECRET])
    assert not holds_secret("nothing here", [SECRET])


def test_a_spelling_cut_off_at_the_end_of_the_output_is_redacted() -> None:
    spelled = base64.b64encode(PLAIN.encode()).decode()
    tail = cut_tail(f"step 3\ncurl -H 'X-Key: {spelled[:12]}".encode(), [PLAIN], from_start=True)
    assert tail.text == f"step 3\ncurl -H 'X-Key: {REDACTED}"


def test_short_secrets_are_looked_for_as_written_only() -> None:
    short = "x" * (MIN_SPELLED_BYTES - 1)
    assert literal_spellings(short) == set() and percent_pattern(short) is None
    assert percent_pattern(PLAIN.replace("-", "")) is None  # nothing in it is ever encoded
    # Base64 text holds a short secret's runs by chance: they are not looked for.
    noise = base64.b64encode(bytes(range(256))).decode()
    assert redact(noise, ["ab"]) == noise


def test_a_checkpoint_holding_the_secrets_spellings_leaves_the_worker_without_them() -> None:
    from activities.providers.protocol import FileRead
    from activities.sandbox_base.checkpoints import checkpoint_from

    basic = base64.b64encode(f"bot:{SECRET}".encode()).decode()
    # PHP writes `/` as `\/`: the base64 shows no run of the secret until it is parsed.
    escaped = json.dumps(basic).replace("/", "\\/")
    quoted = urllib.parse.quote(SECRET, safe="")
    text = (
        f'{{"next": "call with {basic}", "notes": ["GET /v1?key={quoted}", '
        f'"{SECRET.encode().hex()}"], "header": {escaped}}}'
    )
    read = checkpoint_from(FileRead(status="ok", data=text.encode()), None, [SECRET])
    assert read.text is not None
    value = json.loads(read.text)
    assert value["next"].startswith("call with ") and REDACTED in value["next"]
    assert value["notes"] == [f"GET /v1?key={REDACTED}", REDACTED]
    assert REDACTED in value["header"]
    for spelled in literal_spellings(SECRET):
        assert spelled not in read.text and spelled not in json.dumps(value)
