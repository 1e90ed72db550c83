"""The world of `bench.workspace_kept`: its plan (repository sizes, keeps, the crash agent's
steps), a bare origin of a given size (bench.done_check_cost seeds its repositories with it
too), the agent that pushes only at its end, and the clean-up of every sandbox the bench
made. Apart from the measures, which both stand on it."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from activities.providers.local import disk_image
from activities.providers.local.engine import LocalEngine

AGENT = Path(__file__).resolve().parent / "agents" / "pushes_at_end"
MIB = 1024 * 1024


@dataclass(frozen=True)
class Plan:
    sizes_mib: tuple[int, ...] = (10, 500)
    keeps: int = 5
    steps: int = 4
    crash_at: int = 3
    hold: float = 1.5


QUICK = Plan(sizes_mib=(1, 2), keeps=1, steps=3, crash_at=2, hold=1.5)


def git(cwd: Path, *args: str) -> str:
    """git in `cwd` as the bench (its own name; folders the sandboxes own trusted)."""
    ident = ["-c", "user.name=bench", "-c", "user.email=bench@example.invalid"]
    done = subprocess.run(
        ["git", "-c", "safe.directory=*", *ident, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def make_origin(root: Path, size_mib: int) -> Path:
    """A bare origin holding `size_mib` MiB of incompressible files (256 KiB each, at most)."""
    work, origin = root / "seed", root / "origin.git"
    work.mkdir(parents=True)
    each = min(256 * 1024, size_mib * MIB // 8)
    for i in range(size_mib * MIB // each):
        folder = work / f"d{i % 50}"
        folder.mkdir(exist_ok=True)
        (folder / f"f{i}.bin").write_bytes(os.urandom(each))
    git(work, "init", "-q", "-b", "main")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "seed")
    git(root, "init", "-q", "--bare", "--shared=0777", "-b", "main", str(origin))
    git(work, "push", "-q", str(origin), "main")
    shutil.rmtree(work)
    for path in [root, *root.rglob("*")]:
        path.chmod(0o777 if path.is_dir() else 0o666)
    return origin


def clean_up(root: Path) -> None:
    """Stop every sandbox the bench made (the crashed attempts' are kept paused), detach
    their disk images, and delete the scratch folder."""
    for home in [root / "home", *root.glob("home-*")]:
        engine = LocalEngine(home)
        for meta in engine.list_sandboxes(include_stopped=False):
            engine.stop(meta.id)
        disk_image.detach(home)
    shutil.rmtree(root, ignore_errors=True)
