"""The agent demo reads the CLI's session transcript to know when to kill it: a bounded read
of a regular file's end, never a block on whatever else carries the name."""

from __future__ import annotations

import os
import time
from pathlib import Path

from overnight.demo.kill import TRANSCRIPT_TAIL_BYTES, _tail_of


def test_a_transcripts_end_is_read_and_no_more(tmp_path: Path) -> None:
    transcript = tmp_path / "session.jsonl"
    transcript.write_bytes(b"x" * (3 * TRANSCRIPT_TAIL_BYTES) + b'{"tool": "slow call"}\n')
    tail = _tail_of(transcript)
    assert tail.endswith('{"tool": "slow call"}\n')
    assert len(tail) == TRANSCRIPT_TAIL_BYTES


def test_a_fifo_or_a_folder_named_like_a_transcript_reads_empty_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "held.jsonl"
    os.mkfifo(fifo)  # no writer: a blocking open would wait for ever
    folder = tmp_path / "folder.jsonl"
    folder.mkdir()
    began = time.monotonic()
    assert (_tail_of(fifo), _tail_of(folder), _tail_of(tmp_path / "gone.jsonl")) == ("", "", "")
    assert time.monotonic() - began < 5
