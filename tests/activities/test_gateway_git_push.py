"""What the gateway reads of a push (activities/gateway/git_push.py): the commands at the head
of a receive-pack body, which refs a run may push, and the answer git shows when it may not.
Pure: no git, no sockets (tests/providers/test_local_gateway_git.py drives real git)."""

from __future__ import annotations

import pytest

from activities.gateway.git_push import (
    BadPush,
    read_head,
    refusal_answer,
    refused,
)

OLD, NEW = "0" * 40, "1" * 40


def pkt(text: str) -> bytes:
    data = text.encode()
    return f"{len(data) + 4:04x}".encode() + data


def head_of(*refs: str, caps: str = "report-status side-band-64k") -> bytes:
    lines = [pkt(f"{OLD} {NEW} {refs[0]}\0{caps}\n")]
    lines += [pkt(f"{OLD} {NEW} {ref}\n") for ref in refs[1:]]
    return b"".join(lines) + b"0000" + b"PACK...."


def test_the_commands_are_read_up_to_the_flush_and_the_pack_is_left_alone() -> None:
    data = head_of("refs/heads/agent/r1", "refs/overnight/r1/3")
    head = read_head(data)
    assert head is not None
    assert [c.ref for c in head.commands] == ["refs/heads/agent/r1", "refs/overnight/r1/3"]
    assert "report-status" in head.capabilities
    assert data[head.length :] == b"PACK...."


def test_a_head_cut_short_asks_for_more_bytes() -> None:
    data = head_of("refs/heads/agent/r1")
    assert read_head(data[:10]) is None
    assert read_head(data[: data.index(b"0000")]) is None


@pytest.mark.parametrize(
    "bad", [b"zzzz", b"0002", b"0000", pkt("shallow " + OLD) + b"0000", pkt("a b\n") + b"0000"]
)
def test_what_is_no_command_list_is_refused(bad: bytes) -> None:
    with pytest.raises(BadPush):
        read_head(bad)


@pytest.mark.parametrize(
    "ref",
    [
        "refs/heads/main",
        "refs/tags/v1",
        "refs/heads/agent/r10",  # another run's branch, sharing a prefix
        "refs/overnight/r10/1",  # another run's refs, sharing a prefix
        "refs/overnight/r1/../../heads/main",
        "refs/overnight/r1",
    ],
)
def test_only_the_runs_branch_and_private_refs_may_be_pushed(ref: str) -> None:
    head = read_head(head_of("refs/heads/agent/r1", "refs/overnight/r1/2", ref))
    assert head is not None
    assert list(refused(head, "agent/r1", "r1")) == [ref]


def test_the_refusal_is_a_report_git_prints_in_its_side_band() -> None:
    head = read_head(head_of("refs/heads/agent/r1", "refs/heads/main"))
    assert head is not None
    answer = refusal_answer(head, refused(head, "agent/r1", "r1"))
    assert answer.endswith(b"0000")
    assert b"\x01" in answer and b"unpack ok" in answer
    assert b"ng refs/heads/main overnight: this run may push only" in answer
    assert b"ng refs/heads/agent/r1 overnight: another ref of this push was refused" in answer
    # Without a side band the report is plain pkt-lines.
    plain = read_head(head_of("refs/heads/main", caps="report-status"))
    assert plain is not None
    assert refusal_answer(plain, refused(plain, "agent/r1", "r1")).startswith(pkt("unpack ok\n"))
