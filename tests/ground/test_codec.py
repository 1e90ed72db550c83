"""The payload codec: AES-256-GCM under OVERNIGHT_CODEC_KEYS, rotation, and clear refusals."""

from __future__ import annotations

import base64
import os

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.exceptions import ApplicationError

from overnight.core.codec import (
    CODEC_KEYS_ENV,
    ENCODING,
    KEY_ID_METADATA,
    CodecConfigError,
    CodecKeyError,
    data_converter,
    describe,
    keyring_from_env,
    parse_keys,
)
from overnight.core.models import RunSpec

CHECKPOINT = '{"next": "rewrite the billing module", "notes": ["the secret plan"]}'


def new_key() -> str:
    return base64.b64encode(os.urandom(32)).decode()


def spec() -> RunSpec:
    return RunSpec(
        run_id="codec-1",
        repo="/tmp/app.git",
        agent_dir="/tmp/agent",
        command="python3 main.py --plan 'the secret plan'",
    )


async def test_a_payload_round_trips_and_its_ciphertext_holds_no_plaintext() -> None:
    converter = data_converter(parse_keys(f"k1:{new_key()}"))
    [payload] = await converter.encode([CHECKPOINT])
    assert payload.metadata["encoding"] == ENCODING
    assert payload.metadata[KEY_ID_METADATA] == b"k1"
    assert b"secret plan" not in payload.SerializeToString()
    assert b"json/plain" not in payload.SerializeToString()  # the inner metadata is sealed too
    assert await converter.decode([payload], [str]) == [CHECKPOINT]


async def test_pydantic_models_go_through_the_codec_whole() -> None:
    converter = data_converter(parse_keys(f"k1:{new_key()}"))
    [payload] = await converter.encode([spec()])
    assert b"secret plan" not in payload.data
    assert await converter.decode([payload], [RunSpec]) == [spec()]


async def test_the_first_key_writes_and_every_key_reads_so_rotation_needs_no_downtime() -> None:
    old, new = new_key(), new_key()
    before = data_converter(parse_keys(f"a:{old}"))
    after = data_converter(parse_keys(f"b:{new},a:{old}"))
    [written_before] = await before.encode([CHECKPOINT])
    [written_after] = await after.encode([CHECKPOINT])
    assert written_after.metadata[KEY_ID_METADATA] == b"b"
    assert await after.decode([written_before], [str]) == [CHECKPOINT]
    assert await after.decode([written_after], [str]) == [CHECKPOINT]
    # Before the rotation reached it, a reader names the key id it lacks, and no key.
    with pytest.raises(CodecKeyError, match=r"key id 'b'.*holds 'a'") as caught:
        await before.decode([written_after], [str])
    assert new not in str(caught.value) and old not in str(caught.value)


async def test_a_key_under_the_wrong_id_or_an_altered_payload_fails_clearly() -> None:
    writer = data_converter(parse_keys(f"a:{new_key()}"))
    [payload] = await writer.encode([CHECKPOINT])
    other = data_converter(parse_keys(f"a:{new_key()}"))
    with pytest.raises(CodecKeyError, match="key id 'a' does not decrypt"):
        await other.decode([payload], [str])
    moved = Payload()
    moved.CopyFrom(payload)
    moved.metadata[KEY_ID_METADATA] = b"b"
    both = data_converter(parse_keys(f"a:{new_key()},b:{new_key()}"))
    with pytest.raises(CodecKeyError, match="key id 'b'"):
        await both.decode([moved], [str])
    cut = Payload()
    cut.CopyFrom(payload)
    cut.data = payload.data[:20]
    with pytest.raises(CodecKeyError, match="key id 'a' does not decrypt"):
        await writer.decode([cut], [str])


async def test_plain_payloads_still_read_with_the_codec_on() -> None:
    [plain] = await pydantic_data_converter.encode([CHECKPOINT])
    assert await data_converter(parse_keys(f"a:{new_key()}")).decode([plain], [str]) == [CHECKPOINT]


async def test_failure_messages_are_encrypted_too() -> None:
    converter = data_converter(parse_keys(f"a:{new_key()}"))
    from temporalio.api.failure.v1 import Failure

    failure = Failure()
    await converter.encode_failure(ApplicationError("the secret plan failed", type="X"), failure)
    assert "secret plan" not in failure.message
    assert b"secret plan" not in failure.SerializeToString()
    decoded = await converter.decode_failure(failure)
    assert isinstance(decoded, ApplicationError)
    assert decoded.message == "the secret plan failed" and decoded.type == "X"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("a", r"entry 1 is not id:base64-of-32-bytes"),
        ("a:!!notbase64!!", r"entry 1 \(id 'a'\): the key is not valid base64"),
        (f"a:{base64.b64encode(b'x' * 16).decode()}", r"16 bytes; AES-256 needs 32"),
        ("a:KEY,a:KEY", r"key id 'a' is given twice"),
        ("a:KEY,", r"entry 2 is empty"),
        ("bad id:KEY", r"entry 1: the key id must be"),
    ],
)
def test_bad_configuration_is_refused_in_one_line_that_shows_no_key(text: str, reason: str) -> None:
    key = new_key()
    text = text.replace("KEY", key)
    with pytest.raises(CodecConfigError, match=reason) as caught:
        parse_keys(text)
    message = str(caught.value)
    assert message.startswith(f"{CODEC_KEYS_ENV}: ") and "\n" not in message
    assert key not in message and "!!notbase64!!" not in message


def test_unset_or_blank_means_off_and_the_converter_is_the_plain_pydantic_one() -> None:
    assert keyring_from_env({}) is None
    assert keyring_from_env({CODEC_KEYS_ENV: "  "}) is None
    assert data_converter(from_env=False) is pydantic_data_converter
    assert "not encrypted" in describe(pydantic_data_converter)


def test_nothing_that_may_be_logged_shows_a_key() -> None:
    key = new_key()
    keyring = parse_keys(f"main:{key}")
    converter = data_converter(keyring)
    shown = (repr(keyring), repr(converter), repr(converter.payload_codec), describe(converter))
    for text in shown:
        assert key not in text
        assert repr(base64.b64decode(key)) not in text
    assert "main" in describe(converter)
