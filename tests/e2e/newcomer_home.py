"""A newcomer's home for the e2e tests whose origin is a user's own folder: the test's
`tmp_path` when the tests run as that user; when they run as root (as a root worker serves a
user), a private folder (0700) of another user, outside pytest's root-only folder, so that
nothing of the origin is root's or open to other users."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# The user a root test's newcomer is (not a sandbox's: those are 100000000 and up).
USER_UID = 4242


@contextmanager
def private_home(tmp_path: Path) -> Iterator[Path]:
    if os.geteuid() != 0:
        yield tmp_path
        return
    home = Path(tempfile.mkdtemp(prefix="overnight-newcomer-"))
    try:
        os.chown(home, USER_UID, USER_UID)
        home.chmod(0o700)
        yield home
    finally:
        shutil.rmtree(home, ignore_errors=True)


def give_to_the_user(path: Path) -> None:
    """`path` and everything in it made the newcomer's (when run as root; else it is)."""
    if os.geteuid() == 0:
        subprocess.run(["chown", "-R", f"{USER_UID}:{USER_UID}", str(path)], check=True)
