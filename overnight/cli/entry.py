"""The `overnight` console script: checks that `workflows` and `activities` are overnight's own
(overnight.core.own_packages) before importing the commands, which import both."""

from __future__ import annotations

import sys


def main() -> int:
    from overnight.core.own_packages import shadowed_packages

    problems = shadowed_packages()
    if problems:
        for line in problems:
            print(f"error: {line}", file=sys.stderr)
        return 2
    from overnight.cli.main import main as run

    return run()
