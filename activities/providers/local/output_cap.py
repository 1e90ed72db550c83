"""An agent's `output.log`, kept from filling the disk: what it prints is pumped through the
launcher and written up to `OUTPUT_LOG_CAP` bytes; past it, only the last `TAIL_KEEP` bytes
are kept, in memory, and appended once the agent has ended (after a line saying how much was
left out). The file only ever grows, so readers following it by offset stay right, and its
end is still the agent's last words.

Standard library only: the launcher loads it by path (it runs with `python -I`).
"""

from __future__ import annotations

import os
from pathlib import Path

OUTPUT_LOG_CAP = 64 * 1024 * 1024
TAIL_KEEP = 256 * 1024


class CappedOutput:
    def __init__(self, path: Path, cap: int = OUTPUT_LOG_CAP, keep: int = TAIL_KEEP) -> None:
        self._file = open(path, "ab")  # closed by `close`
        self._written = self._file.tell()
        self._cap = cap
        self._keep = keep
        self.dropped = 0
        self._tail = bytearray()

    def write(self, data: bytes) -> None:
        room = max(0, self._cap - self._written)
        if room:
            kept = data[:room]
            self._file.write(kept)
            self._file.flush()
            self._written += len(kept)
            data = data[room:]
        if data:
            self.dropped += len(data)
            self._tail += data
            del self._tail[: -self._keep]

    def note(self, line: str) -> None:
        """A line of overnight's own, written whatever the cap."""
        self._file.write(f"{line}\n".encode())
        self._file.flush()

    def close(self) -> None:
        if self.dropped:
            left_out = self.dropped - len(self._tail)
            self.note(
                f"\novernight: output past {self._cap // 2**20} MiB is not kept: "
                f"{left_out} bytes left out, the last {len(self._tail)} follow"
            )
            self._file.write(bytes(self._tail))
        self._file.close()


def drain(fd: int, sink: CappedOutput) -> bool:
    """Read what is there now; False once the pipe is closed (every writer gone)."""
    while True:
        try:
            data = os.read(fd, 65536)
        except BlockingIOError:
            return True
        if not data:
            return False
        sink.write(data)
