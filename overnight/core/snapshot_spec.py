"""Snapshot recovery in a `RunSpec`: the fields' types and the per-provider check.

`recovery: "snapshot"` keeps the whole sandbox at safe points (the agent asks, or, with
`snapshot_on_checkpoint`, right after a checkpoint change) and restarts from the latest ready
snapshot instead of clone + upload + checkpoint. Runtime offers `memory` (files and running
processes) and `disk` (files only; the agent starts again on its checkpoint); the local
provider offers `disk` only, as a copy of the sandbox's `/workspace`.
"""

from __future__ import annotations

from typing import Literal, cast

from overnight.core.provider_traits import traits

Recovery = Literal["checkpoint", "snapshot"]
SnapshotMode = Literal["memory", "disk"]
# Snapshots kept per run once a newer one is ready (the latest and the one before, in case the
# latest cannot be restored).
KEEP_SNAPSHOTS = 2


def check_snapshot_mode(provider: str, mode: str | None) -> SnapshotMode:
    """The mode to use (the provider's first when none is given), or ValueError naming the
    field: "snapshot_mode: ..."."""
    offered = traits(provider).snapshot_modes
    chosen = mode or offered[0]
    if chosen not in offered:
        raise ValueError(
            f"snapshot_mode: provider {provider!r} offers {' or '.join(offered)} snapshots only "
            f"(got {chosen!r})"
        )
    return cast(SnapshotMode, chosen)
