"""The state directory: where local sandboxes, the dev server's database and logs live."""

from __future__ import annotations

import os
from pathlib import Path

HOME_ENV = "OVERNIGHT_HOME"
DEFAULT_HOME = "~/.overnight"


def overnight_home() -> Path:
    """`$OVERNIGHT_HOME`, or `~/.overnight` when it is unset or empty; `~` expanded."""
    return Path(os.environ.get(HOME_ENV) or DEFAULT_HOME).expanduser()


def expand_path(value: str) -> Path:
    """Expand `${OVERNIGHT_HOME}` (with its default), other environment variables and `~`."""
    home = str(overnight_home())
    value = value.replace("${" + HOME_ENV + "}", home).replace("$" + HOME_ENV, home)
    return Path(os.path.expandvars(value)).expanduser()
